package domain_test

import (
	"strings"
	"testing"

	"maintsignals/shared/domain"
)

func TestSubscriptionNames_CarryTheTenantTokensAheadOfTheName(t *testing.T) {
	key := domain.SubscriptionKey(domain.TenantOf("subscriptions/s1/resourcegroups/rg-a/providers/p/c/c1"), "crm")
	if key != "s1.rg-a.crm" {
		t.Fatalf("key %q", key)
	}
	for _, subj := range []string{domain.SubscriptionCommandSubject(key), domain.SubscriptionEventSubject(key), domain.SubscriptionSubject(key), domain.SubscriptionSecretSubject(key)} {
		if got := domain.SubscriptionKeyOf(subj); got != key {
			t.Errorf("key of %s: %q", subj, got)
		}
	}
	if domain.SubscriptionKeyOf("a.b") != "" {
		t.Error("a subject of two tokens has no located name")
	}
	if dlq := domain.SubscriptionDLQSubject(key); dlq != "maint.dlq.s1~rg-a~crm" {
		t.Errorf("dead letters on %s, want one token", dlq)
	}
}

func TestSubscriptionDelivery_IsOneTokenNewForEachCreate(t *testing.T) {
	a := domain.SubscriptionDelivery("s1.rg-a.crm", "s-1", 7)
	for _, other := range []string{
		domain.SubscriptionDelivery("s1.rg-a.crm", "s-2", 8), // created again under the name
		domain.SubscriptionDelivery("s2.rg-a.crm", "s-1", 7), // another tenant's
	} {
		if other == a {
			t.Errorf("two subscriptions share the delivery name %s", a)
		}
	}
	if a != domain.SubscriptionDelivery("s1.rg-a.crm", "s-1", 7) || !strings.HasPrefix(a, "crm~") || strings.ContainsAny(a, ".*> ") {
		t.Errorf("delivery name %q: want the same each time, the name first, one token", a)
	}
}
