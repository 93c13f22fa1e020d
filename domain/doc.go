// Package domain holds the flash-sale entities and their rules: vouchers with a
// sale window and stock, voucher orders and their IDs, and the errors a claim can
// end in. It imports the standard library only.
package domain
