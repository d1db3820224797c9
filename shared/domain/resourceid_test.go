package domain_test

import (
	"regexp"
	"testing"

	"maintsignals/shared/domain"
)

func TestARMResourceIDPattern(t *testing.T) {
	re := regexp.MustCompile(domain.ARMResourceIDPattern)
	for _, id := range []string{
		aroID,
		"/subscriptions/0b1f6471-1bf0-4dda-aec3-111122223333/resourceGroups/rg-1/providers/Microsoft.RedHatOpenShift/openShiftClusters/c1",
		"/SUBSCRIPTIONS/0B1F/RESOURCEGROUPS/RG/PROVIDERS/MICROSOFT.COMPUTE/VIRTUALMACHINES/VM1",
		"/subscriptions/0b1f/resourceGroups/rg/providers/Microsoft.Sql/servers/s1/databases/db1",
	} {
		if !re.MatchString(id) {
			t.Errorf("%s does not match", id)
		}
	}
	for _, id := range []string{
		"c9", "my cluster", "/subscriptions/0b1f", "/subscriptions/0b1f/resourceGroups/rg",
		"/subscriptions/0b1f/resourceGroups/rg/providers/Microsoft.RedHatOpenShift/openShiftClusters",
		"/subscriptions/0b1f/resourceGroups//providers/p/t/n", "/subscriptions/zz/resourceGroups/rg/providers/p/t/n",
		"/subscriptions/0b1f/resourceGroups/rg/providers/p/t/n/",
	} {
		if re.MatchString(id) {
			t.Errorf("%q matches", id)
		}
	}
}

func TestCheckResourceIDPattern(t *testing.T) {
	re := regexp.MustCompile(domain.ARMResourceIDPattern)
	stray := domain.Command{ID: "x", ResourceID: "c9", Task: domain.TaskEverything}
	if rej := domain.CheckResourceIDPattern(stray, re); rej == nil || rej.Code != domain.CodeInvalidParameter || rej.Target != "resourceId" {
		t.Errorf("stray ID: %v, want InvalidParameter on resourceId", rej)
	}
	if rej := domain.CheckResourceIDPattern(stray, nil); rej != nil {
		t.Errorf("no pattern: %v", rej)
	}
	stray.Task = domain.TaskForget
	if rej := domain.CheckResourceIDPattern(stray, re); rej != nil {
		t.Errorf("Forget of a stray ID: %v, want it allowed", rej)
	}
	if rej := domain.CheckResourceIDPattern(domain.Command{ID: "x", ResourceID: aroID, Task: domain.TaskNone}, re); rej != nil {
		t.Errorf("ARM ID: %v", rej)
	}
}
