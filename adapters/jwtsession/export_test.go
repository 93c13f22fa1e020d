package jwtsession

// Holds tells whether v would answer token from memory.
func Holds(v *Verifier, token string) bool { return v.cache.Holds(token) }
