//! Where the HTTP API's journal queries run: a thread of their own, in Linux's `SCHED_IDLE`
//! scheduling class, with a runtime of its own. A crowd of heavy `/history` and `/audit` readers
//! then takes only the CPU the reconciles, the journal writer and the API server leave: on a busy
//! node the answers come later (or, past the request timeout, a 503), never the restarts. The
//! SQLite connections the queries read through are opened on this thread, so the worker thread
//! sqlx starts for each inherits its class (on Linux a thread's scheduling policy is its own, and
//! a new thread takes its creator's).
//!
//! Why not nice 19: measured (`hack/http-load.sh`), a nice-19 reader still doubled the slot's
//! lateness. Nice weighs the share of CPU, but a reconcile's thread waking up (an API answer, a
//! journal commit) still waits for the reader's time slice on that core, thousands of times in a
//! burst. A `SCHED_IDLE` thread is preempted at once by any normal thread that wakes.

use std::future::Future;

use tokio::{runtime::Handle, sync::oneshot, task::JoinHandle};
use tracing::warn;

/// The query thread: its runtime's handle, and the thread stopping when this is dropped.
pub struct QueryThread {
    handle: Handle,
    _stop: oneshot::Sender<()>,
}

impl QueryThread {
    /// Starts the thread `eru-http-queries`.
    pub fn start() -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .thread_name("eru-http-queries")
            .build()?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("eru-http-queries".into())
            .spawn(move || {
                idle_class();
                runtime.block_on(async {
                    let _ = stopped.await;
                });
            })?;
        Ok(Self { handle, _stop: stop })
    }

    /// Runs `work` on the query thread; dropping the answer's future cancels it there too (a
    /// request past its deadline, a client gone).
    pub fn run<F>(&self, work: F) -> Cancelling<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        Cancelling(self.handle.spawn(work))
    }
}

/// A task on the query thread, aborted when dropped.
pub struct Cancelling<T>(JoinHandle<T>);

impl<T> Future for Cancelling<T> {
    type Output = Result<T, tokio::task::JoinError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0).poll(cx)
    }
}

impl<T> Drop for Cancelling<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// `SCHED_IDLE` for the calling thread (and the threads it starts): no privilege needed to lower.
fn idle_class() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` outlives the call; with a thread id, sched_setscheduler changes that one
    // thread on Linux.
    let result = unsafe { libc::sched_setscheduler(libc::gettid(), libc::SCHED_IDLE, &param) };
    if result != 0 {
        warn!(
            error = %std::io::Error::last_os_error(),
            "the HTTP API's query thread keeps the normal priority"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calling thread's scheduling policy.
    fn policy() -> libc::c_int {
        // SAFETY: reads the calling thread's policy
        unsafe { libc::sched_getscheduler(libc::gettid()) }
    }

    #[tokio::test]
    async fn work_runs_on_an_idle_class_thread_and_threads_it_starts_inherit_it() {
        let mine = policy();
        let queries = QueryThread::start().unwrap();
        let (here, child) = queries
            .run(async { (policy(), std::thread::spawn(policy).join().unwrap()) })
            .await
            .unwrap();
        assert_eq!((here, child), (libc::SCHED_IDLE, libc::SCHED_IDLE));
        // the caller's own thread keeps its class
        assert_eq!(policy(), mine);
    }

    #[tokio::test]
    async fn dropping_the_answer_cancels_the_work() {
        let queries = QueryThread::start().unwrap();
        let (tx, rx) = oneshot::channel::<()>();
        let task = queries.run(async move {
            tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
            drop(tx);
        });
        drop(task);
        // the task was aborted: its end of the channel is dropped without a message
        assert!(rx.await.is_err());
    }
}
