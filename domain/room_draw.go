package domain

import (
	"crypto/sha256"
	"encoding/binary"
	"math/bits"
)

// RoomSeedSize is the length of a draw's secret seed.
const RoomSeedSize = 32

// Draw is the pre-queue's order: a keyed pseudo-random permutation of
// [0, n), where n is how many joined before the draw closed. It is computed,
// never stored: the place of the j-th joiner is one evaluation, so no one
// scans or shuffles the queue, and every instance that knows the seed agrees.
// It is a balanced Feistel network over the smallest even power of two not
// below n, with SHA-256 of the seed as round function, walked in cycles until
// it lands in [0, n) (at most a few steps: the domain is under 4n).
type Draw struct {
	n    uint64
	half uint // bits in each half
	seed [RoomSeedSize]byte
}

// feistelRounds: four rounds of a pseudo-random function make a
// pseudo-random permutation (Luby–Rackoff); two more are cheap insurance.
const feistelRounds = 6

// NewDraw is the draw of n pre-queue joiners under seed.
func NewDraw(seed [RoomSeedSize]byte, n int64) Draw {
	if n < 0 {
		n = 0
	}
	h := uint(1)
	if n > 1 {
		h = uint((bits.Len64(uint64(n-1)) + 1) / 2)
	}
	return Draw{n: uint64(n), half: h, seed: seed}
}

// N is how many places the draw orders.
func (d Draw) N() int64 { return int64(d.n) }

// Place is the position (0 = first in line) of the joiner with join index j:
// drawn for the pre-queue (j < n), first come, first served after it.
func (d Draw) Place(j int64) int64 {
	if j < 0 || uint64(j) >= d.n {
		return j
	}
	x := uint64(j)
	for {
		x = d.permute(x)
		if x < d.n {
			return int64(x)
		}
	}
}

func (d Draw) permute(x uint64) uint64 {
	mask := uint64(1)<<d.half - 1
	l, r := x>>d.half, x&mask
	var buf [RoomSeedSize + 9]byte
	copy(buf[:], d.seed[:])
	for i := 0; i < feistelRounds; i++ {
		buf[RoomSeedSize] = byte(i)
		binary.BigEndian.PutUint64(buf[RoomSeedSize+1:], r)
		sum := sha256.Sum256(buf[:])
		l, r = r, l^(binary.BigEndian.Uint64(sum[:8])&mask)
	}
	return l<<d.half | r
}
