//! The key space and the commands: a sharded map of byte strings with expiry.
//!
//! Runtime-neutral: [`Store::execute`] takes one parsed request and gives its reply, and
//! [`Store::sweep`] removes expired keys; the server decides when to call either.
//!
//! # Expiry: lazy, plus a periodic sweep (not a timer per key)
//!
//! A key past its deadline is treated as absent by every command that reads it, and removed
//! there and then ("lazy expiry"). That alone makes expiry exact: a reply never shows a key
//! after its deadline, however late any timer would fire on a loaded machine. What it leaves
//! is memory: a key that nobody reads again stays allocated. [`Store::sweep`], which the
//! server runs every [`SWEEP_EVERY`], removes those: each shard keeps a min-heap of
//! (deadline, key), so a sweep looks only at the keys whose deadline has passed, not at the
//! whole key space.
//!
//! A timer per key (`eddy::call_at`) was the alternative. It was not taken because the reads
//! would need the lazy check anyway (a timer fires at its deadline or later, never exactly),
//! so the timers would only replace the sweep, at a higher price: a timer allocation and
//! heap entry per `SET ... EX`, a handle kept in every entry to cancel or re-arm on each
//! `SET`, `EXPIRE` or `DEL` of the key, and a callback per expired key instead of one pass per
//! period. It would also tie the store to eddy, where now the same store runs under tokio
//! for the benchmark.

use std::cmp::Reverse;
use std::collections::hash_map::{Entry as Slot, RandomState};
use std::collections::{BinaryHeap, HashMap};
use std::hash::BuildHasher;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::resp::{parse_i64, Command, Reply};

/// How often the server should call [`Store::sweep`] (Redis's active expiry runs ten times a
/// second too).
pub(crate) const SWEEP_EVERY: Duration = Duration::from_millis(100);

/// Shards of the key space, each behind its own lock: enough that workers seldom meet.
const SHARDS: usize = 64;

/// Due keys a sweep removes from one shard per lock hold, so that commands on that shard
/// wait at most this long behind it.
const SWEEP_BATCH: usize = 256;

/// A value and its deadline.
#[derive(Debug)]
struct Entry {
    value: Vec<u8>,
    deadline: Option<Instant>,
}

impl Entry {
    fn expired(&self, now: Instant) -> bool {
        self.deadline.is_some_and(|d| d <= now)
    }
}

#[derive(Debug, Default)]
struct Shard {
    map: HashMap<Vec<u8>, Entry>,
    /// (deadline, key) of keys that were given a deadline. An entry is stale once its key
    /// was removed or given another deadline; a sweep drops stale entries as they come due,
    /// and the heap is rebuilt from the map when stale ones could outnumber the keys.
    deadlines: BinaryHeap<Reverse<(Instant, Vec<u8>)>>,
}

impl Shard {
    /// The live entry of `key`, removing it first if it has expired (lazy expiry).
    fn live(&mut self, key: &[u8], now: Instant) -> Option<&mut Entry> {
        if self.map.get(key)?.expired(now) {
            self.map.remove(key);
            return None;
        }
        self.map.get_mut(key)
    }

    fn contains(&mut self, key: &[u8], now: Instant) -> bool {
        self.live(key, now).is_some()
    }

    /// Stores `value` under `key` with `deadline`.
    fn set(&mut self, key: Vec<u8>, value: Vec<u8>, deadline: Option<Instant>) {
        if let Some(deadline) = deadline {
            self.watch(deadline, key.clone());
        }
        self.map.insert(key, Entry { value, deadline });
    }

    /// Gives the existing `key` a deadline.
    fn expire_at(&mut self, key: &[u8], deadline: Instant) {
        if let Some(entry) = self.map.get_mut(key) {
            entry.deadline = Some(deadline);
            self.watch(deadline, key.to_vec());
        }
    }

    fn watch(&mut self, deadline: Instant, key: Vec<u8>) {
        self.deadlines.push(Reverse((deadline, key)));
        if self.deadlines.len() > 2 * self.map.len() + 1024 {
            self.deadlines = self
                .map
                .iter()
                .filter_map(|(k, e)| e.deadline.map(|d| Reverse((d, k.clone()))))
                .collect();
        }
    }
}

/// The key space: byte-string keys and values, each key with an optional deadline.
///
/// The shard locks are `std`'s (futex-based, as fast as `parking_lot`'s when uncontended):
/// the test and benchmark crates compile this file too, and need no other dependency.
#[derive(Debug)]
pub(crate) struct Store {
    shards: Box<[Mutex<Shard>]>,
    hasher: RandomState,
}

/// An expiry deadline, as options give it.
enum When {
    /// Milliseconds from now (`EX`, `PX`, `EXPIRE`, `PEXPIRE`).
    In(i64),
    /// Milliseconds since the Unix epoch (`EXAT`, `PXAT`).
    At(i64),
}

/// How an expiry option turns out: a deadline, already past, or out of range.
enum Deadline {
    At(Instant),
    Past,
    Invalid,
}

impl Store {
    /// An empty store.
    pub(crate) fn new() -> Self {
        Store {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            hasher: RandomState::new(),
        }
    }

    fn shard(&self, key: &[u8]) -> MutexGuard<'_, Shard> {
        let index = self.hasher.hash_one(key) as usize % SHARDS;
        // Nothing panics while holding a shard, and each change is a single map operation,
        // so a poisoned shard would still be consistent: serving on beats refusing forever.
        self.shards[index]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The number of keys, including expired ones not yet removed (as Redis's `DBSIZE`).
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(PoisonError::into_inner).map.len())
            .sum()
    }

    /// Removes every key whose deadline is at or before `now`; returns how many.
    pub(crate) fn sweep(&self, now: Instant) -> usize {
        let mut removed = 0;
        for shard in self.shards.iter() {
            loop {
                let mut shard = shard.lock().unwrap_or_else(PoisonError::into_inner);
                let mut looked_at = 0;
                while looked_at < SWEEP_BATCH {
                    match shard.deadlines.peek() {
                        Some(Reverse((deadline, _))) if *deadline <= now => {}
                        _ => break,
                    }
                    let Some(Reverse((deadline, key))) = shard.deadlines.pop() else {
                        break;
                    };
                    looked_at += 1;
                    if let Slot::Occupied(slot) = shard.map.entry(key) {
                        if slot.get().deadline == Some(deadline) {
                            slot.remove();
                            removed += 1;
                        }
                    }
                }
                if looked_at < SWEEP_BATCH {
                    break;
                }
            }
        }
        removed
    }

    /// Runs one request at `now` and gives its reply. Errors are replies too (`-ERR ...`):
    /// the connection goes on after them.
    pub(crate) fn execute(&self, command: Command, now: Instant) -> Reply {
        let Some(name) = command.first() else {
            return Reply::err("empty command");
        };
        let mut lower = [0u8; 16];
        let Some(spec) = (name.len() <= lower.len())
            .then(|| {
                lower[..name.len()].copy_from_slice(name);
                lower[..name.len()].make_ascii_lowercase();
                &lower[..name.len()]
            })
            .and_then(|name| COMMANDS.iter().find(|c| c.name.as_bytes() == name))
        else {
            return unknown_command(&command);
        };
        let arity_ok = if spec.arity >= 0 {
            command.len() == spec.arity as usize
        } else {
            command.len() >= spec.arity.unsigned_abs() as usize
        };
        if !arity_ok {
            return wrong_arity(spec.name);
        }
        (spec.run)(self, command, now)
    }

    fn get(&self, mut args: Command, now: Instant) -> Reply {
        let key = args.swap_remove(1);
        match self.shard(&key).live(&key, now) {
            Some(entry) => Reply::Bulk(entry.value.clone()),
            None => Reply::Nil,
        }
    }

    fn set(&self, args: Command, now: Instant) -> Reply {
        #[derive(Clone, Copy, PartialEq)]
        enum Expiry {
            Unset,
            Keep,
            Ex,
            Px,
            ExAt,
            PxAt,
        }
        let (mut nx, mut xx, mut get, mut expiry) = (false, false, false, Expiry::Unset);
        let mut time: Option<&[u8]> = None;
        let mut i = 3;
        // Redis's rules: each option may repeat; NX excludes XX; the expiry options exclude
        // one another (but repeat); an option missing its number is a syntax error.
        while i < args.len() {
            let option = args[i].to_ascii_lowercase();
            let number = args.get(i + 1).map(Vec::as_slice);
            let timed = match option.as_slice() {
                b"ex" => Some(Expiry::Ex),
                b"px" => Some(Expiry::Px),
                b"exat" => Some(Expiry::ExAt),
                b"pxat" => Some(Expiry::PxAt),
                _ => None,
            };
            let free = |e: Expiry| expiry == Expiry::Unset || expiry == e;
            match (option.as_slice(), timed) {
                (b"nx", _) if !xx => nx = true,
                (b"xx", _) if !nx => xx = true,
                (b"get", _) => get = true,
                (b"keepttl", _) if free(Expiry::Keep) => expiry = Expiry::Keep,
                (_, Some(e)) if free(e) && number.is_some() => {
                    expiry = e;
                    time = number;
                    i += 1;
                }
                _ => return syntax_error(),
            }
            i += 1;
        }
        let deadline = match time {
            None => None,
            Some(time) => {
                let Some(n) = parse_i64(time) else {
                    return not_an_integer();
                };
                let seconds = matches!(expiry, Expiry::Ex | Expiry::ExAt);
                if n <= 0 || (seconds && n > i64::MAX / 1000) {
                    return invalid_expire("set");
                }
                let ms = if seconds { n * 1000 } else { n };
                let when = if matches!(expiry, Expiry::Ex | Expiry::Px) {
                    When::In(ms)
                } else {
                    When::At(ms)
                };
                match deadline(when, now) {
                    Deadline::Invalid => return invalid_expire("set"),
                    Deadline::Past => Some(None),
                    Deadline::At(at) => Some(Some(at)),
                }
            }
        };
        let mut args = args.into_iter().skip(1);
        let (Some(key), Some(value)) = (args.next(), args.next()) else {
            return wrong_arity("set");
        };
        let mut shard = self.shard(&key);
        let old = shard.live(&key, now);
        let found = old.is_some();
        let old_deadline = old.as_ref().and_then(|e| e.deadline);
        let reply = match old {
            _ if !get => Reply::OK,
            Some(entry) => Reply::Bulk(entry.value.clone()),
            None => Reply::Nil,
        };
        if (nx && found) || (xx && !found) {
            return if get { reply } else { Reply::Nil };
        }
        match deadline {
            // EXAT or PXAT in the past: the key is set and gone at once.
            Some(None) => {
                shard.map.remove(&key);
            }
            Some(Some(at)) => shard.set(key, value, Some(at)),
            None if expiry == Expiry::Keep => shard.set(key, value, old_deadline),
            None => shard.set(key, value, None),
        }
        reply
    }

    fn del(&self, args: Command, now: Instant) -> Reply {
        let mut removed = 0;
        for key in &args[1..] {
            // An expired key is removed too, but not counted.
            if self
                .shard(key)
                .map
                .remove(key.as_slice())
                .is_some_and(|e| !e.expired(now))
            {
                removed += 1;
            }
        }
        Reply::Integer(removed)
    }

    fn exists(&self, args: Command, now: Instant) -> Reply {
        let found = args[1..]
            .iter()
            .filter(|key| self.shard(key).contains(key, now))
            .count();
        Reply::Integer(found as i64)
    }

    fn incr_by(&self, key: Vec<u8>, by: i64, now: Instant) -> Reply {
        let mut shard = self.shard(&key);
        let entry = shard.live(&key, now);
        let current = match &entry {
            None => 0,
            Some(entry) => match parse_i64(&entry.value) {
                Some(n) => n,
                None => return not_an_integer(),
            },
        };
        let Some(next) = current.checked_add(by) else {
            return Reply::err("increment or decrement would overflow");
        };
        let value = next.to_string().into_bytes();
        match entry {
            // The deadline stays, as in Redis.
            Some(entry) => entry.value = value,
            None => shard.set(key, value, None),
        }
        Reply::Integer(next)
    }

    fn incr(&self, mut args: Command, now: Instant) -> Reply {
        self.incr_by(args.swap_remove(1), 1, now)
    }

    fn decr(&self, mut args: Command, now: Instant) -> Reply {
        self.incr_by(args.swap_remove(1), -1, now)
    }

    fn expire_generic(&self, args: Command, now: Instant, name: &str, seconds: bool) -> Reply {
        let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
        for option in &args[3..] {
            match option.to_ascii_lowercase().as_slice() {
                b"nx" => nx = true,
                b"xx" => xx = true,
                b"gt" => gt = true,
                b"lt" => lt = true,
                _ => {
                    return Reply::err(format_args!(
                        "Unsupported option {}",
                        String::from_utf8_lossy(option)
                    ))
                }
            }
        }
        if nx && (xx || gt || lt) {
            return Reply::err("NX and XX, GT or LT options at the same time are not compatible");
        }
        if gt && lt {
            return Reply::err("GT and LT options at the same time are not compatible");
        }
        let Some(n) = parse_i64(&args[2]) else {
            return not_an_integer();
        };
        let ms = if seconds {
            match n.checked_mul(1000) {
                Some(ms) => ms,
                None => return invalid_expire(name),
            }
        } else {
            n
        };
        let new = match deadline(When::In(ms), now) {
            Deadline::Invalid => return invalid_expire(name),
            Deadline::Past => None,
            Deadline::At(at) => Some(at),
        };
        let key = &args[1];
        let mut shard = self.shard(key);
        let Some(entry) = shard.live(key, now) else {
            return Reply::Integer(0);
        };
        // No deadline counts as infinitely far: GT never beats it, LT always does.
        let current = entry.deadline;
        let refused = (nx && current.is_some())
            || (xx && current.is_none())
            || (gt && (current.is_none() || new.is_none_or(|new| Some(new) <= current)))
            || (lt && current.is_some_and(|current| new.is_some_and(|new| new >= current)));
        if refused {
            return Reply::Integer(0);
        }
        match new {
            None => {
                shard.map.remove(key.as_slice());
            }
            Some(at) => shard.expire_at(key, at),
        }
        Reply::Integer(1)
    }

    fn expire(&self, args: Command, now: Instant) -> Reply {
        self.expire_generic(args, now, "expire", true)
    }

    fn pexpire(&self, args: Command, now: Instant) -> Reply {
        self.expire_generic(args, now, "pexpire", false)
    }

    /// -2 for no key, -1 for no deadline, else the time left in milliseconds.
    fn time_left_ms(&self, key: &[u8], now: Instant) -> i64 {
        match self.shard(key).live(key, now) {
            None => -2,
            Some(Entry { deadline: None, .. }) => -1,
            Some(Entry {
                deadline: Some(at), ..
            }) => i64::try_from(at.duration_since(now).as_millis()).unwrap_or(i64::MAX),
        }
    }

    fn ttl(&self, args: Command, now: Instant) -> Reply {
        match self.time_left_ms(&args[1], now) {
            // Rounded to the nearest second, as Redis does.
            ms if ms >= 0 => Reply::Integer(ms.saturating_add(500) / 1000),
            code => Reply::Integer(code),
        }
    }

    fn pttl(&self, args: Command, now: Instant) -> Reply {
        Reply::Integer(self.time_left_ms(&args[1], now))
    }

    fn mget(&self, args: Command, now: Instant) -> Reply {
        Reply::Array(
            args[1..]
                .iter()
                .map(|key| match self.shard(key).live(key, now) {
                    Some(entry) => Reply::Bulk(entry.value.clone()),
                    None => Reply::Nil,
                })
                .collect(),
        )
    }

    fn mset(&self, args: Command, _now: Instant) -> Reply {
        // Keys and values in pairs: a key left without its value is an arity error.
        if !args[1..].chunks_exact(2).remainder().is_empty() {
            return wrong_arity("mset");
        }
        let mut args = args.into_iter().skip(1);
        while let (Some(key), Some(value)) = (args.next(), args.next()) {
            self.shard(&key).set(key, value, None);
        }
        Reply::OK
    }

    fn dbsize(&self, _args: Command, _now: Instant) -> Reply {
        Reply::Integer(self.len() as i64)
    }

    fn flushdb(&self, args: Command, _now: Instant) -> Reply {
        match args.get(1).map(|a| a.to_ascii_lowercase()) {
            None => {}
            Some(mode) if args.len() == 2 && (mode == b"sync" || mode == b"async") => {}
            Some(_) => return syntax_error(),
        }
        for shard in self.shards.iter() {
            let mut shard = shard.lock().unwrap_or_else(PoisonError::into_inner);
            *shard = Shard::default();
        }
        Reply::OK
    }

    fn ping(&self, mut args: Command, _now: Instant) -> Reply {
        match args.len() {
            1 => Reply::Status("PONG"),
            2 => Reply::Bulk(args.swap_remove(1)),
            _ => wrong_arity("ping"),
        }
    }

    fn echo(&self, mut args: Command, _now: Instant) -> Reply {
        Reply::Bulk(args.swap_remove(1))
    }

    fn select(&self, args: Command, _now: Instant) -> Reply {
        // One database, as Redis with `databases 1`.
        match parse_i64(&args[1]) {
            None => not_an_integer(),
            Some(n) if i32::try_from(n).is_err() => Reply::err(format_args!(
                "value is out of range, value must between {} and {}",
                i32::MIN,
                i32::MAX
            )),
            Some(0) => Reply::OK,
            Some(_) => Reply::err("DB index is out of range"),
        }
    }

    fn command(&self, args: Command, _now: Instant) -> Reply {
        let Some(sub) = args.get(1) else {
            return Reply::Array(COMMANDS.iter().map(CommandSpec::info).collect());
        };
        match sub.to_ascii_lowercase().as_slice() {
            b"count" if args.len() == 2 => Reply::Integer(COMMANDS.len() as i64),
            b"count" => wrong_arity("command|count"),
            b"info" if args.len() == 2 => {
                Reply::Array(COMMANDS.iter().map(CommandSpec::info).collect())
            }
            b"info" => Reply::Array(
                args[2..]
                    .iter()
                    .map(|name| {
                        let name = name.to_ascii_lowercase();
                        COMMANDS
                            .iter()
                            .find(|c| c.name.as_bytes() == name)
                            .map_or(Reply::Nil, CommandSpec::info)
                    })
                    .collect(),
            ),
            // No documentation is kept; an empty answer tells redis-cli to use its own.
            b"docs" => Reply::Array(Vec::new()),
            _ => unknown_subcommand(sub, "COMMAND"),
        }
    }

    fn config(&self, args: Command, _now: Instant) -> Reply {
        // What tools ask to learn whether the server persists (redis-benchmark warns when it
        // cannot tell): it never does.
        const PARAMETERS: &[(&str, &str)] = &[("save", ""), ("appendonly", "no")];
        if !args[1].eq_ignore_ascii_case(b"get") {
            return unknown_subcommand(&args[1], "CONFIG");
        }
        if args.len() < 3 {
            return wrong_arity("config|get");
        }
        let mut found = Vec::new();
        for (name, value) in PARAMETERS {
            if args[2..]
                .iter()
                .any(|pattern| glob_match(&pattern.to_ascii_lowercase(), name.as_bytes()))
            {
                found.push(Reply::text(name));
                found.push(Reply::text(value));
            }
        }
        Reply::Array(found)
    }

    fn client(&self, args: Command, _now: Instant) -> Reply {
        // What client libraries send on connect (the `redis` crate among them) and ignore
        // the answer to.
        if !args[1].eq_ignore_ascii_case(b"setinfo") {
            return unknown_subcommand(&args[1], "CLIENT");
        }
        if args.len() != 4 {
            return wrong_arity("client|setinfo");
        }
        let attribute = args[2].to_ascii_lowercase();
        if attribute == b"lib-name" || attribute == b"lib-ver" {
            Reply::OK
        } else {
            Reply::err(format_args!(
                "Unrecognized option '{}'",
                String::from_utf8_lossy(&args[2])
            ))
        }
    }
}

/// Turns an expiry option into a deadline, with Redis's range rule: the absolute time in
/// milliseconds since the epoch must fit in an `i64`.
fn deadline(when: When, now: Instant) -> Deadline {
    let unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let left_ms = match when {
        When::In(ms) => {
            if unix_ms.checked_add(ms).is_none() {
                return Deadline::Invalid;
            }
            ms
        }
        When::At(ms) => ms.saturating_sub(unix_ms),
    };
    if left_ms <= 0 {
        return Deadline::Past;
    }
    match now.checked_add(Duration::from_millis(left_ms as u64)) {
        Some(at) => Deadline::At(at),
        None => Deadline::Invalid,
    }
}

/// Matches `name` against a glob `pattern` with `*` and `?` (enough for `CONFIG GET`).
fn glob_match(pattern: &[u8], name: &[u8]) -> bool {
    match pattern.split_first() {
        None => name.is_empty(),
        Some((b'*', rest)) => (0..=name.len()).any(|skip| glob_match(rest, &name[skip..])),
        Some((b'?', rest)) => !name.is_empty() && glob_match(rest, &name[1..]),
        Some((c, rest)) => name.first() == Some(c) && glob_match(rest, &name[1..]),
    }
}

fn syntax_error() -> Reply {
    Reply::err("syntax error")
}

fn not_an_integer() -> Reply {
    Reply::err("value is not an integer or out of range")
}

fn invalid_expire(command: &str) -> Reply {
    Reply::err(format_args!("invalid expire time in '{command}' command"))
}

fn wrong_arity(command: &str) -> Reply {
    Reply::err(format_args!(
        "wrong number of arguments for '{command}' command"
    ))
}

/// Redis's text: the name and then the arguments, quoted, up to about 128 bytes of them.
fn unknown_command(command: &[Vec<u8>]) -> Reply {
    let name = &command[0][..command[0].len().min(128)];
    let mut shown = Vec::new();
    for arg in &command[1..] {
        if shown.len() >= 128 {
            break;
        }
        let room = 128 - shown.len();
        shown.push(b'\'');
        shown.extend_from_slice(&arg[..arg.len().min(room)]);
        shown.extend_from_slice(b"' ");
    }
    Reply::err(format_args!(
        "unknown command '{}', with args beginning with: {}",
        String::from_utf8_lossy(name),
        String::from_utf8_lossy(&shown)
    ))
}

fn unknown_subcommand(sub: &[u8], command: &str) -> Reply {
    Reply::err(format_args!(
        "unknown subcommand '{}'. Try {command} HELP.",
        String::from_utf8_lossy(&sub[..sub.len().min(128)])
    ))
}

/// A command the store knows: its name, Redis's arity (`n`: exactly `n` words with the
/// name, `-n`: at least `n`), what `COMMAND` says of it, and what runs it.
struct CommandSpec {
    name: &'static str,
    arity: i32,
    flags: &'static [&'static str],
    /// First key, last key (`-1`: the last argument) and step, as `COMMAND` reports them.
    keys: (i64, i64, i64),
    run: fn(&Store, Command, Instant) -> Reply,
}

impl CommandSpec {
    /// Redis 7's `COMMAND INFO` entry, with no ACL categories, tips, key specs or
    /// subcommands.
    fn info(&self) -> Reply {
        Reply::Array(vec![
            Reply::text(self.name),
            Reply::Integer(self.arity.into()),
            Reply::Array(self.flags.iter().map(|&f| Reply::Status(f)).collect()),
            Reply::Integer(self.keys.0),
            Reply::Integer(self.keys.1),
            Reply::Integer(self.keys.2),
            Reply::Array(Vec::new()),
            Reply::Array(Vec::new()),
            Reply::Array(Vec::new()),
            Reply::Array(Vec::new()),
        ])
    }
}

const NO_KEYS: (i64, i64, i64) = (0, 0, 0);
const ONE_KEY: (i64, i64, i64) = (1, 1, 1);
const ALL_KEYS: (i64, i64, i64) = (1, -1, 1);

const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "get",
        arity: 2,
        flags: &["readonly", "fast"],
        keys: ONE_KEY,
        run: Store::get,
    },
    CommandSpec {
        name: "set",
        arity: -3,
        flags: &["write", "denyoom"],
        keys: ONE_KEY,
        run: Store::set,
    },
    CommandSpec {
        name: "del",
        arity: -2,
        flags: &["write"],
        keys: ALL_KEYS,
        run: Store::del,
    },
    CommandSpec {
        name: "exists",
        arity: -2,
        flags: &["readonly", "fast"],
        keys: ALL_KEYS,
        run: Store::exists,
    },
    CommandSpec {
        name: "incr",
        arity: 2,
        flags: &["write", "denyoom", "fast"],
        keys: ONE_KEY,
        run: Store::incr,
    },
    CommandSpec {
        name: "decr",
        arity: 2,
        flags: &["write", "denyoom", "fast"],
        keys: ONE_KEY,
        run: Store::decr,
    },
    CommandSpec {
        name: "expire",
        arity: -3,
        flags: &["write", "fast"],
        keys: ONE_KEY,
        run: Store::expire,
    },
    CommandSpec {
        name: "pexpire",
        arity: -3,
        flags: &["write", "fast"],
        keys: ONE_KEY,
        run: Store::pexpire,
    },
    CommandSpec {
        name: "ttl",
        arity: 2,
        flags: &["readonly", "fast"],
        keys: ONE_KEY,
        run: Store::ttl,
    },
    CommandSpec {
        name: "pttl",
        arity: 2,
        flags: &["readonly", "fast"],
        keys: ONE_KEY,
        run: Store::pttl,
    },
    CommandSpec {
        name: "mget",
        arity: -2,
        flags: &["readonly", "fast"],
        keys: ALL_KEYS,
        run: Store::mget,
    },
    CommandSpec {
        name: "mset",
        arity: -3,
        flags: &["write", "denyoom"],
        keys: (1, -1, 2),
        run: Store::mset,
    },
    CommandSpec {
        name: "dbsize",
        arity: 1,
        flags: &["readonly", "fast"],
        keys: NO_KEYS,
        run: Store::dbsize,
    },
    CommandSpec {
        name: "flushdb",
        arity: -1,
        flags: &["write"],
        keys: NO_KEYS,
        run: Store::flushdb,
    },
    CommandSpec {
        name: "ping",
        arity: -1,
        flags: &["fast"],
        keys: NO_KEYS,
        run: Store::ping,
    },
    CommandSpec {
        name: "echo",
        arity: 2,
        flags: &["fast"],
        keys: NO_KEYS,
        run: Store::echo,
    },
    CommandSpec {
        name: "select",
        arity: 2,
        flags: &["loading", "stale", "fast"],
        keys: NO_KEYS,
        run: Store::select,
    },
    CommandSpec {
        name: "command",
        arity: -1,
        flags: &["loading", "stale"],
        keys: NO_KEYS,
        run: Store::command,
    },
    CommandSpec {
        name: "config",
        arity: -2,
        flags: &["admin", "loading", "stale"],
        keys: NO_KEYS,
        run: Store::config,
    },
    CommandSpec {
        name: "client",
        arity: -2,
        flags: &["loading", "stale"],
        keys: NO_KEYS,
        run: Store::client,
    },
];
