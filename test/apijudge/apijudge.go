// Package apijudge judges answers of the API against its OpenAPI document with kin-openapi's
// openapi3filter, a validator that knows nothing of this code.
package apijudge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// ErrNoOperation is the error of a request that no operation of the document matches.
var ErrNoOperation = errors.New("no operation of the document")

// Judge holds a document, loaded and found valid OpenAPI.
type Judge struct {
	Doc    *openapi3.T
	router routers.Router
}

// New loads the document b and checks that it is valid OpenAPI.
func New(b []byte) (*Judge, error) {
	doc, err := openapi3.NewLoader().LoadFromData(b)
	if err != nil {
		return nil, fmt.Errorf("the document does not load: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("the document is not valid OpenAPI: %w", err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("the document's routes: %w", err)
	}
	return &Judge{Doc: doc, router: router}, nil
}

// Validate checks the answer (status, header, body) to req against the document: the body
// too, but of an event stream.
func (j *Judge) Validate(req *http.Request, status int, header http.Header, body []byte) error {
	route, params, err := j.router.FindRoute(req)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoOperation, err)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}},
		Status: status, Header: header, Body: io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true,
			ExcludeResponseBody: strings.HasPrefix(header.Get("Content-Type"), "text/event-stream")},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		return fmt.Errorf("not as the document says: %w", err)
	}
	return nil
}
