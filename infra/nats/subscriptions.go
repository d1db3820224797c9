package natsconf

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats-server/v2/server"

	"maintsignals/shared/domain"
)

// The permissions of the self-service webhook subscriptions (README, Tenants), kept apart from
// the roles' other subjects. Their subjects and bucket keys carry the tenant tokens ahead of
// the name (domain.SubscriptionKey), so that a customer user is confined to the subscriptions
// of its own scopes with whole-token wildcards:
//
//   - an admin sends subscription commands for any tenant, reads every subscription (never a
//     secret: those are in a bucket only the functions read) and every outcome;
//   - a customer user with scopes (--users, "scopes") sends the commands of its scopes' tenants
//     only, reads their subscriptions and outcomes only (an ordered consumer whose filter, in
//     the request's subject, NATS checks), and may ask the server which those are
//     ($SYS.REQ.USER.INFO); a customer without scopes gets none of it;
//   - no other role sends subscription commands, and only the functions write subscriptions,
//     secrets and outcomes.
//
// The commands carry the secrets: no role but the functions (and the operator) reads
// MAINT_SUBSCRIPTIONS.

// userInfo is the request by which a client learns its own permissions.
const userInfo = "$SYS.REQ.USER.INFO"

// subscriptionAccess adds to role r's publish and subscribe allow lists what it does with
// self-service subscriptions (the admin's; a customer's comes with its scopes, userPermissions).
func subscriptionAccess(r Role, pub, sub []string) ([]string, []string) {
	if r != RoleAdmin {
		return pub, sub
	}
	pub = slices.Concat(pub, []string{domain.SubscriptionCommandPrefix + ">"},
		readStream(domain.SubscriptionsBucketStream), readStream(domain.SubscriptionEventsStream))
	return pub, append(sub, domain.SubscriptionEventPrefix+">")
}

// subscriptionDenied is what role r (not the operator) may never publish of the self-service
// subscriptions.
func subscriptionDenied(r Role) []string {
	var d []string
	for _, s := range []string{domain.SubscriptionsStream, domain.SubscriptionEventsStream, domain.SubscriptionsBucketStream, domain.SubscriptionSecretsStream} {
		d = append(d, api+"STREAM.MSG.DELETE."+s)
	}
	if r != RoleFunction {
		d = append(d, domain.SubscriptionEventPrefix+">", domain.SubscriptionSubject(">"), domain.SubscriptionSecretSubject(">"))
	}
	if r != RoleAdmin && r != RoleCustomer {
		d = append(d, domain.SubscriptionCommandPrefix+">")
	}
	return d
}

// CustomerSubscriptions is what a customer user of scopes may do with self-service
// subscriptions, each subject confined to the scopes' tenant tokens (domain.Scope.Tokens).
func CustomerSubscriptions(scopes []domain.Scope) (pub, sub []string) {
	if len(scopes) == 0 {
		return nil, nil
	}
	for _, sc := range scopes {
		t := sc.Tokens()
		pub = append(pub,
			domain.SubscriptionCommandPrefix+t,
			api+"CONSUMER.CREATE."+domain.SubscriptionsBucketStream+".*."+domain.SubscriptionSubject(t),
			api+"CONSUMER.CREATE."+domain.SubscriptionEventsStream+".*."+domain.SubscriptionEventPrefix+t)
		sub = append(sub, domain.SubscriptionEventPrefix+t)
	}
	// The ordered consumers those made: read, look up, removed. (Their names are random; the
	// streams hold no durable consumer.)
	for _, s := range []string{domain.SubscriptionsBucketStream, domain.SubscriptionEventsStream} {
		pub = append(pub, api+"CONSUMER.MSG.NEXT."+s+".*", api+"CONSUMER.INFO."+s+".*", api+"CONSUMER.DELETE."+s+".*")
	}
	return append(pub, userInfo), sub
}

// userPermissions is the permission set of user u (User.Permissions), and for a customer with
// scopes what those allow of the self-service subscriptions.
func userPermissions(u User) (*server.Permissions, error) {
	p, err := u.Permissions()
	if err != nil || u.Role != RoleCustomer || len(u.Scopes) == 0 {
		return p, err
	}
	scopes, err := ParseScopes(u.Scopes)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrInvalidUser, u.Name, err)
	}
	pub, sub := CustomerSubscriptions(scopes)
	p.Publish.Allow = appendNew(p.Publish.Allow, pub...)
	p.Subscribe.Allow = appendNew(p.Subscribe.Allow, sub...)
	return p, nil
}

// userPermVar is the name, in a rendered file, of the permission set of a user with scopes of
// its own ("" for one that takes its role's).
func userPermVar(u User) string {
	if len(u.Scopes) == 0 {
		return ""
	}
	return "PERMISSIONS_USER_" + strings.ToUpper(strings.ReplaceAll(u.Name, "-", "_"))
}

// renderUserPermissions writes the permission sets of the users with scopes of their own.
func renderUserPermissions(w func(int, string, ...any), users []User) error {
	for _, u := range users {
		if userPermVar(u) == "" {
			continue
		}
		p, err := userPermissions(u)
		if err != nil {
			return err
		}
		w(0, "# %s: role %s, scopes %s", u.Name, u.Role, strings.Join(u.Scopes, ", "))
		w(0, "%s = {", userPermVar(u))
		renderSubjects(w, "publish", p.Publish.Allow, p.Publish.Deny)
		renderSubjects(w, "subscribe", p.Subscribe.Allow, p.Subscribe.Deny)
		w(0, "}")
	}
	return nil
}
