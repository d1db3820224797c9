package emitter

// WithDefaults lets the tests of package emitter_test see the defaults New fills in.
func (c Config) WithDefaults() (Config, error) { return c.withDefaults() }
