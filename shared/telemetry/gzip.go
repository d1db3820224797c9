package telemetry

import (
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"google.golang.org/grpc/encoding"
	grpcgzip "google.golang.org/grpc/encoding/gzip"
)

// The gzip of every OTLP request of the process, emissions and the SDK's periodic exports,
// over gRPC and over HTTP: klauspost/compress at its fastest level. On 2 cores it compresses
// an emission's points several times faster than the standard library at its default level,
// for requests about a third larger (about 30 against 40 times smaller than raw): the trade a
// fleet's points, out within a tick, want. It replaces grpc's own "gzip" compressor (same
// name, same format), which is registered before it: this package imports grpc's.
const gzipLevel = gzip.BestSpeed

func init() { encoding.RegisterCompressor(&gzipCompressor{}) }

// gzipName is the name of the compressor and of the Content-Encoding.
const gzipName = grpcgzip.Name

type gzipCompressor struct {
	writers, readers sync.Pool
}

// Name implements encoding.Compressor.
func (c *gzipCompressor) Name() string { return gzipName }

// Compress implements encoding.Compressor.
func (c *gzipCompressor) Compress(w io.Writer) (io.WriteCloser, error) {
	if z, ok := c.writers.Get().(*gzipWriter); ok {
		z.Reset(w)
		return z, nil
	}
	z, err := gzip.NewWriterLevel(w, gzipLevel)
	if err != nil {
		return nil, err
	}
	return &gzipWriter{Writer: z, pool: &c.writers}, nil
}

type gzipWriter struct {
	*gzip.Writer
	pool *sync.Pool
}

func (z *gzipWriter) Close() error {
	defer z.pool.Put(z)
	return z.Writer.Close()
}

// Decompress implements encoding.Compressor.
func (c *gzipCompressor) Decompress(r io.Reader) (io.Reader, error) {
	if z, ok := c.readers.Get().(*gzipReader); ok {
		if err := z.Reset(r); err != nil {
			c.readers.Put(z)
			return nil, err
		}
		return z, nil
	}
	z, err := gzip.NewReader(r)
	if err != nil {
		return nil, err
	}
	return &gzipReader{Reader: z, pool: &c.readers}, nil
}

type gzipReader struct {
	*gzip.Reader
	pool *sync.Pool
}

func (z *gzipReader) Close() error {
	defer z.pool.Put(z)
	return z.Reader.Close()
}
