package cli

import "strings"

// ShortNames names entities briefly for a table's NAME column: an Azure Resource Manager ID
// by its resource group and its last name ("rg-1/c1"), any other ID as it is. Where two IDs
// of the same table get the same short name, both keep their full ID, so that a name never
// stands for two entities.
func ShortNames(ids []string) []string {
	out := make([]string, len(ids))
	// The distinct IDs (compared case-insensitively) behind each short name.
	behind := map[string]map[string]bool{}
	for i, id := range ids {
		out[i] = shortName(id)
		k := strings.ToLower(out[i])
		if behind[k] == nil {
			behind[k] = map[string]bool{}
		}
		behind[k][strings.ToLower(id)] = true
	}
	for i, id := range ids {
		if len(behind[strings.ToLower(out[i])]) > 1 {
			out[i] = id
		}
	}
	return out
}

// shortName is "group/name" of an ARM ID (/subscriptions/S/resourceGroups/G/providers/…/name).
func shortName(id string) string {
	parts := strings.Split(strings.TrimPrefix(id, "/"), "/")
	if len(parts) < 7 || !strings.EqualFold(parts[0], "subscriptions") || !strings.EqualFold(parts[2], "resourcegroups") ||
		!strings.EqualFold(parts[4], "providers") || parts[len(parts)-1] == "" || parts[3] == "" {
		return id
	}
	return parts[3] + "/" + parts[len(parts)-1]
}
