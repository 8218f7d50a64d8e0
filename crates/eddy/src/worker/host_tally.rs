//! A host's count of wake-ups served only for its guest (`handoff`): when the guest's
//! sockets carry all the traffic, the roles swap. A leaf: the worker loop counts, the
//! hand-off decides.

/// How many wake-ups in a row a host serves only its guest's events (none of its own)
/// before it passes the hosting to that guest: the guest's sockets carry the traffic, and
/// the host pays a second `epoll_wait` (the guest's) for every event it serves there, where
/// the guest waiting on its own epoll would make one. Many in a row, because each pass
/// costs the guest a wake-up, and a host whose own sockets are quiet only for a moment
/// should keep the role.
const PASS_HOSTING_AFTER: u32 = 64;

/// A host's wake-ups in a row that served only its guests' events; past
/// `PASS_HOSTING_AFTER` it passes the hosting on at its next park.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GuestOnlyWakes(u32);

impl GuestOnlyWakes {
    /// After a wake-up whose harvest found `own` events on our sockets and `guests` on our
    /// guests'. A wake-up with no IO at all (work pushed at us, a timer) changes nothing.
    pub(crate) fn after_wake(self, own: usize, guests: usize) -> GuestOnlyWakes {
        if own > 0 {
            GuestOnlyWakes(0)
        } else if guests > 0 {
            GuestOnlyWakes(self.0.saturating_add(1))
        } else {
            self
        }
    }

    /// Whether to pass the hosting to our guest.
    pub(crate) fn pass_hosting(self) -> bool {
        self.0 >= PASS_HOSTING_AFTER
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_passes_the_hosting_after_many_wake_ups_in_a_row_for_its_guest_alone() {
        let mut wakes = GuestOnlyWakes::default();
        for _ in 0..PASS_HOSTING_AFTER - 1 {
            wakes = wakes.after_wake(0, 1);
            // Wake-ups without IO (work pushed at us, a timer) neither count nor reset.
            wakes = wakes.after_wake(0, 0);
        }
        assert!(!wakes.pass_hosting());
        assert!(
            !wakes.after_wake(1, 5).after_wake(0, 1).pass_hosting(),
            "an event of our own starts the count again"
        );
        assert!(wakes.after_wake(0, 3).pass_hosting());
    }
}
