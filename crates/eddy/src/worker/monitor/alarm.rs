//! The monitor's alarm clock: a one-shot Linux timerfd that the monitor sleeps on, and that
//! any thread can set with one system call that wakes nobody *now*.
//!
//! Why not a condition variable: a worker leaving its park while the monitor sleeps must
//! make sure the monitor looks again, and it does so before it runs the job it woke up for.
//! A condition variable can only wake the monitor at once: a futex wake-up, which on a
//! virtual machine sends an interrupt to another CPU, on the path of every first job after
//! a quiet spell (a callback submitted from a foreign thread, a request on an idle server).
//! The monitor has nothing to see that early anyway: a job can only be stuck once it has
//! run a while. So the alarm is set for a little later instead (`timerfd_settime`: a timer
//! on the caller's CPU, no other thread woken), and the monitor's first look comes when it
//! can be of use. A thread that submits work from outside sets it itself, right after it
//! wakes a worker for the work, so the setting (a few microseconds on a virtual machine,
//! where programming a CPU's timer leaves the guest) is off the woken worker's path too;
//! a worker woken by its own IO or timers sets it on its way out of its park.
//!
//! The monitor sleeps on the alarm only while every worker is parked; between looks it
//! waits on a condition variable with a timeout (one system call, where the alarm takes
//! two). Invariants: setting the alarm replaces any earlier setting (the kernel also clears
//! the expiry count), and [`Alarm::wait`] returns only after an expiry, so an alarm set
//! before the monitor blocks is not lost, and while it is not set the monitor sleeps until
//! a thread sets it.

use std::io;
use std::os::fd::OwnedFd;
use std::time::Duration;

use rustix::time::{
    timerfd_create, timerfd_settime, Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags,
    Timespec,
};

/// A one-shot alarm on the monotonic clock.
#[derive(Debug)]
pub(crate) struct Alarm {
    fd: OwnedFd,
}

impl Alarm {
    /// A new alarm, not set.
    pub(crate) fn new() -> io::Result<Alarm> {
        let fd = timerfd_create(TimerfdClockId::Monotonic, TimerfdFlags::CLOEXEC)
            .map_err(|e| with_context(e, "creating the monitor's timerfd"))?;
        Ok(Alarm { fd })
    }

    /// Sets the alarm to go off `after` from now (at least a nanosecond: a zero setting
    /// would disarm it), replacing any earlier setting. Callable from any thread.
    pub(crate) fn set(&self, after: Duration) {
        let after = after.max(Duration::from_nanos(1));
        let once = Itimerspec {
            it_interval: Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: Timespec {
                tv_sec: after.as_secs() as _,
                tv_nsec: after.subsec_nanos() as _,
            },
        };
        // Fails only for a bad descriptor or a value out of range, neither of which can
        // happen here: the fd lives as long as `self`, and the value is normalised above.
        timerfd_settime(&self.fd, TimerfdTimerFlags::empty(), &once)
            .expect("setting the monitor's timerfd");
    }

    /// Blocks until the alarm goes off (at once if it went off since it was last set and
    /// waited on). An alarm that is not set blocks until some thread sets it.
    pub(crate) fn wait(&self) {
        let mut expirations = [0u8; 8];
        loop {
            match rustix::io::read(&self.fd, &mut expirations) {
                Ok(_) => return,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => panic!("waiting on the monitor's timerfd: {e}"),
            }
        }
    }
}

fn with_context(e: rustix::io::Errno, what: &str) -> io::Error {
    let e = io::Error::from(e);
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Instant;

    use super::*;

    #[test]
    fn a_set_alarm_ends_the_wait_no_sooner_than_it_was_set_for() {
        let alarm = Alarm::new().unwrap();
        let start = Instant::now();
        alarm.set(Duration::from_millis(2));
        alarm.wait();
        assert!(start.elapsed() >= Duration::from_millis(2));
    }

    #[test]
    fn an_alarm_set_before_the_wait_is_not_lost() {
        let alarm = Alarm::new().unwrap();
        alarm.set(Duration::from_nanos(1));
        std::thread::yield_now();
        // It went off before anyone waited: the wait returns at once.
        alarm.wait();
    }

    #[test]
    fn an_alarm_not_set_waits_for_another_thread_to_set_it() {
        let alarm = Arc::new(Alarm::new().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = {
            let alarm = alarm.clone();
            std::thread::spawn(move || {
                alarm.wait();
                tx.send(()).unwrap();
            })
        };
        // Not set: nothing ends the wait yet.
        assert!(rx.recv_timeout(Duration::from_millis(20)).is_err());
        alarm.set(Duration::ZERO);
        rx.recv_timeout(Duration::from_secs(30))
            .expect("setting the alarm from another thread ends the wait");
        waiter.join().unwrap();
    }

    #[test]
    fn a_later_setting_replaces_an_earlier_one() {
        let alarm = Alarm::new().unwrap();
        alarm.set(Duration::from_secs(3600));
        alarm.set(Duration::from_nanos(1));
        // Would block for an hour if the first setting still held.
        alarm.wait();
    }
}
