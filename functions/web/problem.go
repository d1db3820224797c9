package web

import (
	"encoding/json"
	"net/http"
	"strings"

	"maintsignals/shared/domain"
)

// Errors of the API are RFC 9457 problem details. Each carries a code: the domain's
// rejection codes (shared/domain) and the API's own; its type is ProblemBase followed by the
// code, a page of infra/docs/integrating.md describes each.

// ProblemBase is the start of every problem type URI.
const ProblemBase = "https://maintsignals.dev/problems/"

// The API's problem codes beside the domain's.
const (
	CodeNotFound    domain.Code = "NotFound"
	CodeUnavailable domain.Code = "Unavailable"
	CodeInternal    domain.Code = "Internal"
)

// Problem is an RFC 9457 problem detail.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	// Code is the code the type names; Target the parameter at fault, if one is.
	Code   domain.Code `json:"code"`
	Target string      `json:"target,omitempty"`
}

// problemCode is the code of the problems of status.
func problemCode(status int) domain.Code {
	switch status {
	case http.StatusBadRequest:
		return domain.CodeInvalidParameter
	case http.StatusUnauthorized:
		return domain.CodeUnauthorized
	case http.StatusNotFound:
		return CodeNotFound
	case http.StatusMethodNotAllowed:
		return domain.CodeRequestNotAllowed
	case http.StatusNotAcceptable:
		return domain.CodeInvalidRequestContent
	case http.StatusServiceUnavailable:
		return CodeUnavailable
	}
	return CodeInternal
}

// ProblemCodes are every code a problem of the API may carry.
func ProblemCodes() []domain.Code {
	return []domain.Code{domain.CodeInvalidParameter, domain.CodeInvalidRequestContent, domain.CodeUnauthorized,
		domain.CodeRequestNotAllowed, CodeNotFound, CodeUnavailable, CodeInternal}
}

// isAPI reports whether r asks the API (its errors are problems).
func isAPI(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/api/") }

// problem answers an error of the API; target names the parameter at fault ("" none).
func (v *View) problem(w http.ResponseWriter, status int, target, detail string) {
	code := problemCode(status)
	p := Problem{Type: ProblemBase + string(code), Title: http.StatusText(status), Status: status,
		Detail: detail, Code: code, Target: target}
	b, err := json.Marshal(p)
	if err != nil {
		v.log.Error("encode problem", "error", err)
	}
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "2")
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
