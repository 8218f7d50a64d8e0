//! Streams of events (`futures_core::Stream`): interval ticks, signal deliveries, a
//! `JoinSet`'s results as they finish, and a listener's incoming connections.

use std::time::Duration;

use eddy::net::{TcpListener, TcpStream};
use eddy::signal::{signal, SignalKind};
use eddy::JoinSet;
use eddy_tests::run;
use futures_lite::StreamExt;

#[test]
fn an_interval_streams_its_scheduled_ticks() {
    let period = Duration::from_millis(2);
    let ticks: Vec<_> = run(async move { eddy::time::interval(period).take(4).collect().await });
    assert_eq!(ticks.len(), 4);
    for (k, tick) in ticks.iter().enumerate() {
        assert_eq!(*tick - ticks[0], period * k as u32, "tick {k}");
    }
}

#[test]
fn a_signal_streams_its_deliveries() {
    let delivered = run(async {
        let mut usr2 = signal(SignalKind::user_defined2()).unwrap();
        let mut delivered = 0;
        for _ in 0..3 {
            // SAFETY: raise(2) has no memory-safety preconditions; the listener above keeps
            // SIGUSR2's default action (terminate) off.
            assert_eq!(unsafe { libc::raise(libc::SIGUSR2) }, 0);
            usr2.next()
                .await
                .expect("a signal stream never ends")
                .unwrap();
            delivered += 1;
        }
        delivered
    });
    assert_eq!(delivered, 3);
}

#[test]
fn a_join_set_streams_results_in_the_order_tasks_finish_then_ends() {
    let order = run(async {
        let mut set = JoinSet::new();
        let mut gates = Vec::new();
        for i in 0..4u32 {
            let (open, gate) = async_channel::bounded::<()>(1);
            gates.push(open);
            set.spawn(async move {
                let _ = gate.recv().await;
                i
            });
        }
        let mut order = Vec::new();
        // Release the tasks in an order of our choosing, one at a time.
        for i in [2usize, 0, 3, 1] {
            gates[i].send(()).await.unwrap();
            order.push(set.next().await.expect("a task is left").unwrap());
        }
        assert!(set.next().await.is_none(), "an empty set ends the stream");
        order
    });
    assert_eq!(order, [2, 0, 3, 1]);
}

#[test]
fn a_listener_streams_incoming_connections() {
    let echoed = run(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let clients = eddy::spawn(async move {
            let mut echoed = Vec::new();
            for i in 0..3u8 {
                let client = TcpStream::connect(addr).await.unwrap();
                client.write_all(&[i]).await.unwrap();
                let mut byte = [0u8];
                client.read_exact(&mut byte).await.unwrap();
                echoed.push(byte[0]);
            }
            echoed
        });
        let mut incoming = listener.incoming().take(3);
        while let Some(conn) = incoming.next().await {
            let conn = conn.unwrap();
            let mut byte = [0u8];
            conn.read_exact(&mut byte).await.unwrap();
            conn.write_all(&[byte[0] + 10]).await.unwrap();
        }
        clients.await.unwrap()
    });
    assert_eq!(echoed, [10, 11, 12]);
}
