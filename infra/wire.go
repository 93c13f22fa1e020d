//go:build wireinject

package infra

import (
	"github.com/google/wire"
	"github.com/rs/zerolog"
)

// InitApp wires the service; provideQueue picks the queue driver.
func InitApp(c Config, log zerolog.Logger) (*App, func(), error) {
	wire.Build(providers)
	return nil, nil, nil
}
