package natsconf

import (
	"fmt"
	"slices"

	"github.com/nats-io/nats-server/v2/server"

	"maintsignals/shared/domain"
)

// Tenants (README, Tenants): a customer user with scopes reads the records, history and
// notices of the entities inside them, and nothing else, because every subject and bucket
// key of an entity starts with its tenant tokens (domain.Located) and the permissions below
// name them. What such a user may not send is what names no subject a permission could
// confine: stream info (its subjects filter lists every tenant's keys), a message get by
// body, a direct get by sequence, a consumer without a filter, the listing of consumers.

// TenantPermissions is the permission set of customer user name confined to scopes.
func TenantPermissions(name string, scopes []domain.Scope) (*server.Permissions, error) {
	if len(scopes) == 0 {
		return nil, fmt.Errorf("%w %s: a confined customer needs scopes", ErrInvalidUser, name)
	}
	// It sends commands and policy commands as before: what takes effect is decided by the
	// signature (a customer signer acts within its scopes).
	pub := []string{domain.CommandPrefix + "*", domain.PolicyPrefix + "*", api + "INFO"}
	var sub []string
	for _, s := range domain.Disjoint(scopes) {
		t := s.Tokens()
		sub = append(sub, domain.EventPrefix+"*."+t, domain.NoticePrefix+"*."+t)
		// The policies of its scopes, under <subscription>.<group>.<scope key>; and, confined
		// to a resource group, the policy of its subscription, which covers its entities too.
		policies := domain.PoliciesPrefix + t
		pub = append(pub, api+"DIRECT.GET."+domain.PoliciesBucketStream+"."+policies, api+"CONSUMER.CREATE."+domain.PoliciesBucketStream+".*."+policies)
		if s.Tenant.Group != domain.NoToken {
			pub = append(pub, api+"DIRECT.GET."+domain.PoliciesBucketStream+"."+domain.PolicySubject("subscriptions/"+s.Tenant.Subscription))
		}
		// Its entities' campaign phases, under <campaign>.<subscription>.<group>.<key>.
		phases := "$KV." + domain.CampaignEntitiesBucket + ".*." + t
		pub = append(pub, api+"DIRECT.GET."+phasesStream+"."+phases, api+"CONSUMER.CREATE."+phasesStream+".*."+phases)
		for _, c := range domain.AllCells() {
			kv := "$KV." + c.RecordsBucket() + "." + t
			pub = append(pub,
				api+"DIRECT.GET."+c.RecordsStream()+"."+kv,
				api+"CONSUMER.CREATE."+c.RecordsStream()+".*."+kv,
				api+"CONSUMER.CREATE."+c.EventsStream()+".*."+domain.EventPrefix+c.String()+"."+t,
				api+"CONSUMER.CREATE."+c.NoticesStream()+".*."+domain.NoticePrefix+c.String()+"."+t,
			)
		}
	}
	// Its consumers, once made: their names are the server's or random, and it may not list
	// the others'.
	streams := []string{phasesStream, domain.PoliciesBucketStream}
	for _, c := range domain.AllCells() {
		streams = append(streams, c.RecordsStream(), c.EventsStream(), c.NoticesStream())
	}
	for _, s := range streams {
		pub = append(pub, api+"CONSUMER.MSG.NEXT."+s+".*", api+"CONSUMER.INFO."+s+".*", api+"CONSUMER.DELETE."+s+".*")
	}
	sub = append(sub, TenantInboxPrefix(name)+".>")
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: slices.Compact(pub), Deny: denied(RoleCustomer)},
		Subscribe: &server.SubjectPermission{Allow: sub},
	}, nil
}

// phasesStream is the stream of the campaigns' entity phases.
const phasesStream = "KV_" + domain.CampaignEntitiesBucket

// TenantInboxPrefix is a confined customer's own reply-subject prefix (natsconn.Options.
// InboxPrefix, `--inbox-prefix`): its replies are its alone, not every customer's.
func TenantInboxPrefix(name string) string { return "_INBOX_customer_" + name }

// Permissions is the permission set of the user: its role's, or a confined customer's.
func (u User) Permissions() (*server.Permissions, error) {
	if u.Role == RoleCustomer && len(u.Scopes) > 0 {
		scopes, err := ParseScopes(u.Scopes)
		if err != nil {
			return nil, fmt.Errorf("%w %s: %w", ErrInvalidUser, u.Name, err)
		}
		return TenantPermissions(u.Name, scopes)
	}
	return u.Role.Permissions()
}

// ParseScopes reads a user's scopes.
func ParseScopes(in []string) ([]domain.Scope, error) {
	out := make([]domain.Scope, 0, len(in))
	for _, s := range in {
		sc, err := domain.ParseScope(s)
		if err != nil {
			return nil, fmt.Errorf("scope %q: %w", s, err)
		}
		out = append(out, sc)
	}
	return out, nil
}
