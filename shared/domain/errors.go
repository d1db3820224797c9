package domain

import "fmt"

// Code is a rejection code of the messaging contract (README).
type Code string

// Rejection codes.
const (
	CodeInvalidRequestContent Code = "InvalidRequestContent"
	CodeInvalidParameter      Code = "InvalidParameter"
	CodeRequestNotAllowed     Code = "RequestNotAllowed"
	CodeUnauthorized          Code = "Unauthorized"
)

// Rejection is why a command is refused: it becomes a "rejected" outcome event, is never
// retried and never changes the record.
type Rejection struct {
	Code    Code
	Target  string // the field at fault, for InvalidParameter
	Message string
}

func (r *Rejection) Error() string {
	if r.Target != "" {
		return fmt.Sprintf("%s (%s): %s", r.Code, r.Target, r.Message)
	}
	return fmt.Sprintf("%s: %s", r.Code, r.Message)
}

func reject(code Code, target, format string, args ...any) *Rejection {
	return &Rejection{Code: code, Target: target, Message: fmt.Sprintf(format, args...)}
}

// InvalidParameter is a rejection that names the field at fault.
func InvalidParameter(target, format string, args ...any) *Rejection {
	return reject(CodeInvalidParameter, target, format, args...)
}
