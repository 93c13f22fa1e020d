package application

import (
	"context"
	"fmt"

	"github.com/hmdp-go/seckill/domain"
	"github.com/hmdp-go/seckill/ports"
)

// RoomGate is the StockGate that opens a sale's waiting room before the gate
// makes the sale claimable, on a preheat and on a restore from the database
// alike: there is never a moment when a room sale's gate exists and its
// room does not, so no instance can take it for a sale without a room. Sales
// without a room go straight to the gate.
type RoomGate struct {
	ports.StockGate
	rooms ports.RoomStore
	dir   *RoomDirectory
}

func NewRoomGate(gate ports.StockGate, rooms ports.RoomStore, dir *RoomDirectory) *RoomGate {
	mustHave("RoomGate", map[string]any{"gate": gate, "rooms": rooms, "dir": dir})
	return &RoomGate{StockGate: gate, rooms: rooms, dir: dir}
}

func (g *RoomGate) open(ctx context.Context, v domain.Voucher) error {
	if err := g.rooms.Open(ctx, v); err != nil {
		return fmt.Errorf("open waiting room of voucher %d: %w", v.ID(), err)
	}
	g.dir.Remember(v)
	return nil
}

func (g *RoomGate) Preheat(ctx context.Context, v domain.Voucher) error {
	if err := g.open(ctx, v); err != nil {
		return err
	}
	return g.StockGate.Preheat(ctx, v)
}

func (g *RoomGate) Restore(ctx context.Context, v domain.Voucher, buyers []domain.VoucherOrder) (bool, error) {
	if err := g.open(ctx, v); err != nil {
		return false, err
	}
	return g.StockGate.Restore(ctx, v, buyers)
}
