//! The cache file's checksum, against torn or damaged files.

/// A 64-bit checksum against torn or damaged files (not against an attacker: whoever can write
/// the git dir can move the refs themselves). Four lanes of 8 bytes, so it runs at memory speed.
pub(super) fn checksum(data: &[u8]) -> u64 {
    let mut sum = Checksum::default();
    sum.update(data);
    sum.finish()
}

/// [`checksum`] of data given in pieces, so that a file can be checked as it is written,
/// without holding it whole.
pub(super) struct Checksum {
    lanes: [u64; 4],
    /// The bytes given since the last whole 32-byte chunk.
    pending: [u8; 32],
    pending_len: usize,
    total: u64,
}

impl Default for Checksum {
    fn default() -> Checksum {
        Checksum {
            lanes: [
                0x243F_6A88_85A3_08D3,
                0x1319_8A2E_0370_7344,
                0xA409_3822_299F_31D0,
                0x082E_FA98_EC4E_6C89,
            ],
            pending: [0; 32],
            pending_len: 0,
            total: 0,
        }
    }
}

impl Checksum {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;

    /// Adds `data`, the next bytes.
    pub(super) fn update(&mut self, mut data: &[u8]) {
        self.total += data.len() as u64;
        if self.pending_len > 0 {
            let take = (32 - self.pending_len).min(data.len());
            self.pending[self.pending_len..self.pending_len + take].copy_from_slice(&data[..take]);
            self.pending_len += take;
            data = &data[take..];
            if self.pending_len < 32 {
                return;
            }
            let chunk = self.pending;
            self.mix(&chunk);
            self.pending_len = 0;
        }
        let mut chunks = data.chunks_exact(32);
        for chunk in &mut chunks {
            self.mix(chunk);
        }
        let rest = chunks.remainder();
        self.pending[..rest.len()].copy_from_slice(rest);
        self.pending_len = rest.len();
    }

    fn mix(&mut self, chunk: &[u8]) {
        for (lane, word) in self.lanes.iter_mut().zip(chunk.chunks_exact(8)) {
            let mut w = [0u8; 8];
            w.copy_from_slice(word);
            *lane = (*lane ^ u64::from_le_bytes(w)).wrapping_mul(Self::K);
            *lane ^= *lane >> 29;
        }
    }

    /// How many bytes were given.
    pub(super) fn total(&self) -> u64 {
        self.total
    }

    /// The checksum of every byte given.
    pub(super) fn finish(&self) -> u64 {
        let mut h = self.total.wrapping_mul(Self::K);
        for lane in self.lanes {
            h = (h ^ lane).wrapping_mul(Self::K).rotate_left(23);
        }
        for &b in &self.pending[..self.pending_len] {
            h = (h ^ u64::from(b)).wrapping_mul(Self::K);
        }
        h ^ (h >> 31)
    }
}
