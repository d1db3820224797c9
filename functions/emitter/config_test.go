package emitter_test

import (
	"errors"
	"testing"
	"time"

	"maintsignals/functions/emitter"
)

func TestConfig_WithDefaults(t *testing.T) {
	tests := []struct {
		name    string
		cfg     emitter.Config
		wantErr bool
		check   func(emitter.Config) bool
	}{
		{name: "zero config takes the defaults", check: func(c emitter.Config) bool {
			return c.Retention == emitter.DefaultRetention && c.ExportTimeout == emitter.DefaultExportTimeout &&
				c.BatchSize == emitter.DefaultBatchSize && c.MaxRequestBytes == emitter.DefaultMaxRequestBytes &&
				!c.PUCM && c.Now != nil && c.Logger != nil
		}},
		{name: "explicit values are kept", cfg: emitter.Config{Retention: time.Hour, PUCM: true, ExportTimeout: 5 * time.Second, BatchSize: 20000},
			check: func(c emitter.Config) bool {
				return c.Retention == time.Hour && c.PUCM && c.ExportTimeout == 5*time.Second && c.BatchSize == 20000
			}},
		{name: "a short tick shortens the default export timeout", cfg: emitter.Config{Tick: 2 * time.Second},
			check: func(c emitter.Config) bool { return c.ExportTimeout == 1500*time.Millisecond }},
		{name: "a long tick keeps the default export timeout", cfg: emitter.Config{Tick: time.Hour},
			check: func(c emitter.Config) bool { return c.ExportTimeout == emitter.DefaultExportTimeout }},
		{name: "export timeout as long as the tick", cfg: emitter.Config{Tick: time.Second, ExportTimeout: time.Second}, wantErr: true},
		{name: "negative tick", cfg: emitter.Config{Tick: -time.Second}, wantErr: true},
		{name: "negative retention", cfg: emitter.Config{Retention: -time.Second}, wantErr: true},
		{name: "negative export timeout", cfg: emitter.Config{ExportTimeout: -time.Second}, wantErr: true},
		{name: "export timeout too short to export anything", cfg: emitter.Config{ExportTimeout: time.Millisecond}, wantErr: true},
		{name: "negative batch size", cfg: emitter.Config{BatchSize: -1}, wantErr: true},
		{name: "batch smaller than one entity", cfg: emitter.Config{BatchSize: 5}, wantErr: true},
		{name: "negative request cap", cfg: emitter.Config{MaxRequestBytes: -1}, wantErr: true},
		{name: "request cap too small", cfg: emitter.Config{MaxRequestBytes: 1000}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.cfg.WithDefaults()
			if tt.wantErr {
				if !errors.Is(err, emitter.ErrInvalidConfig) {
					t.Fatalf("err = %v, want ErrInvalidConfig", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(got) {
				t.Errorf("config %+v", got)
			}
		})
	}
}
