//! The task IDs of one task list back to back in one string, for the
//! `q=` substring search: one pass over a few contiguous megabytes instead
//! of following two pointers per task (the record, then its ID's bytes).

/// Task IDs concatenated in list order; `ends[k]` is where the `k`-th
/// ends (exclusive) and the next begins.
#[derive(Debug, Clone, Default)]
pub(super) struct IdText {
    text: String,
    ends: Vec<usize>,
}

impl IdText {
    /// An empty text for about `n` IDs of `bytes` bytes in all.
    pub(super) fn with_capacity(n: usize, bytes: usize) -> IdText {
        IdText {
            text: String::with_capacity(bytes),
            ends: Vec::with_capacity(n),
        }
    }

    /// Appends the next ID.
    pub(super) fn push(&mut self, id: &str) {
        self.text.push_str(id);
        self.ends.push(self.text.len());
    }

    /// ID `k` (empty when out of range).
    pub(super) fn get(&self, k: usize) -> &str {
        let start = if k == 0 {
            0
        } else {
            self.ends.get(k - 1).copied().unwrap_or(0)
        };
        let end = self.ends.get(k).copied().unwrap_or(start);
        self.text.get(start..end).unwrap_or("")
    }

    /// Bytes of text.
    pub(super) fn bytes(&self) -> usize {
        self.text.len()
    }

    /// Whether each ID contains `needle` (every one for an empty needle).
    /// A match that runs from one ID into the next counts for neither.
    pub(super) fn containing(&self, needle: &str) -> Vec<bool> {
        let mut hit = vec![needle.is_empty(); self.ends.len()];
        if needle.is_empty() {
            return hit;
        }
        let mut from = 0;
        while let Some(found) = self.text.get(from..).and_then(|rest| rest.find(needle)) {
            let at = from + found;
            // The ID holding byte `at`: the first that ends after it.
            let k = self.ends.partition_point(|&end| end <= at);
            let Some(&end) = self.ends.get(k) else { break };
            if at + needle.len() <= end {
                if let Some(h) = hit.get_mut(k) {
                    *h = true;
                }
                // The rest of this ID cannot make it match more.
                from = end;
            } else {
                // Straddles a boundary: a later match may still lie
                // inside this ID. `at` starts a char (a match does).
                let step = self
                    .text
                    .get(at..)
                    .and_then(|r| r.chars().next())
                    .map_or(1, char::len_utf8);
                from = at + step;
            }
        }
        hit
    }
}
