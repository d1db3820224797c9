package campaignspec

import (
	"strconv"
	"strings"

	"maintsignals/shared/domain"
)

// Threshold is a wave's failureThreshold: a share of the wave's size, in millionths (so that
// comparing counts with it is exact). The zero Threshold is none.
type Threshold struct {
	ppm int64
	set bool
}

// ParseThreshold reads "N%" with N from 0 to 100 and at most four decimals ("2%", "0.5%");
// "" is no threshold.
func ParseThreshold(s string) (Threshold, *domain.Rejection) {
	if s == "" {
		return Threshold{}, nil
	}
	num, ok := strings.CutSuffix(s, "%")
	whole, frac, _ := strings.Cut(num, ".")
	bad := !ok || whole == "" || len(frac) > 4 || strings.Contains(num, ".") && frac == "" ||
		strings.Trim(whole+frac, "0123456789") != ""
	if !bad {
		v, err := strconv.ParseInt(whole+frac+strings.Repeat("0", 4-len(frac)), 10, 64)
		if err == nil && v <= 100*10_000 {
			return Threshold{ppm: v, set: true}, nil // v is in ten-thousandths of a percent: millionths
		}
	}
	return Threshold{}, domain.InvalidParameter("failureThreshold", "must be a share from 0%% to 100%% with at most four decimals, such as 2%% or 0.5%%, got %q", domain.Truncate(s, 32))
}

// Set reports whether there is a threshold.
func (t Threshold) Set() bool { return t.set }

// Exceeded reports whether failed entities of a wave of size entities pass the threshold:
// failed > share × size. With no threshold, never.
func (t Threshold) Exceeded(failed, size int) bool {
	return t.set && int64(failed)*1_000_000 > t.ppm*int64(size)
}

// String writes the threshold in canonical form ("2%", "0.5%"), "" when none.
func (t Threshold) String() string {
	if !t.set {
		return ""
	}
	s := strconv.FormatInt(t.ppm/10_000, 10)
	if f := t.ppm % 10_000; f != 0 {
		s += "." + strings.TrimRight(strconv.FormatInt(10_000+f, 10)[1:], "0")
	}
	return s + "%"
}
