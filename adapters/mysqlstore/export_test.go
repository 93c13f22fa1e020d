package mysqlstore

// SetAfterExpiryScan makes r call f inside ExpireDue's transaction once it
// holds the due orders' locks.
func SetAfterExpiryScan(r *OrderRepo, f func()) { r.afterExpiryScan = f }
