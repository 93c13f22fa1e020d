//go:build wireinject

package infra

import (
	"github.com/google/wire"
	"github.com/rs/zerolog"
)

// InitChannelApp wires the service with the in-process channel queue.
func InitChannelApp(c Config, log zerolog.Logger) (*App, func(), error) {
	wire.Build(channelSet)
	return nil, nil, nil
}

// InitStreamApp wires the service with the Redis Stream queue.
func InitStreamApp(c Config, log zerolog.Logger) (*App, func(), error) {
	wire.Build(streamSet)
	return nil, nil, nil
}
