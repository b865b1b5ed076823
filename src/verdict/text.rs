//! Text verdict (filled in below).
