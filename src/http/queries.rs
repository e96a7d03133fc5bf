//! Where the HTTP API's journal queries run: a thread of their own, with a runtime of its own, in
//! a low scheduling class ([`Class`]). A crowd of heavy `/history` and `/audit` readers then takes
//! only the CPU the reconciles, the journal writer and the API server leave: on a busy node the
//! answers come later (or, past the request timeout, a 503), never the restarts. The SQLite
//! connections the queries read through are opened on this thread, so the worker thread sqlx
//! starts for each inherits its class and nice value (on Linux both are a thread's own, and a new
//! thread takes its creator's).
//!
//! Why `SCHED_IDLE` rather than nice 19: measured (`hack/http-load.sh`), a nice-19 reader still
//! doubled the slot's lateness. Nice weighs the share of CPU, but a reconcile's thread waking up
//! (an API answer, a journal commit) still waits for the reader's time slice on that core,
//! thousands of times in a burst. A `SCHED_IDLE` thread is preempted at once by any normal thread
//! that wakes.
//!
//! Why not always: the class is weighed among the threads of one CPU cgroup. In a container that
//! cgroup is the operator's, so the queries yield only to its own work. A plain process started
//! from a shell or a CI job shares its cgroup with whatever else runs there (a compiler, a test
//! suite), and a `SCHED_IDLE` thread (weight 3 against a normal thread's 1,024) all but waits for
//! every busy one of them: with two busy loops a core, an `/audit` got no answer in 30 s. Nice 19
//! (weight 15) is still a small share, but five times the idle class's, and it answered beside the
//! same loops. So `--http-query-class auto` takes the idle class only as its PID namespace's first
//! process, the mark of a container, and nice 19 otherwise.

use std::future::Future;

use tokio::{runtime::Handle, sync::oneshot, task::JoinHandle};
use tracing::{info, warn};

/// The scheduling class of the query thread (and of the threads it starts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Linux `SCHED_IDLE`.
    Idle,
    /// The normal class at nice [`QUERY_NICE`].
    Nice,
}

/// The nice value of the query thread in [`Class::Nice`]: the lowest.
pub const QUERY_NICE: libc::c_int = 19;

impl Class {
    /// The class `--http-query-class` names, `auto` resolved for the process `pid`: the idle class
    /// for its PID namespace's first process (a container's), else nice; and why, for the log.
    pub fn chosen(choice: crate::config::QueryClass, pid: u32) -> (Class, &'static str) {
        use crate::config::QueryClass;
        match choice {
            QueryClass::Idle => (Class::Idle, "--http-query-class idle"),
            QueryClass::Nice => (Class::Nice, "--http-query-class nice"),
            QueryClass::Auto if pid == 1 => (Class::Idle, "auto: the container's first process (PID 1)"),
            QueryClass::Auto => (
                Class::Nice,
                "auto: not PID 1, so likely sharing its CPU cgroup with other processes, whose busy \
                 threads an idle class would wait for (a container with an init process first: \
                 --http-query-class idle)",
            ),
        }
    }
}

/// The query thread: its runtime's handle, and the thread stopping when this is dropped.
pub struct QueryThread {
    handle: Handle,
    _stop: oneshot::Sender<()>,
}

impl QueryThread {
    /// Starts the thread `eru-http-queries` in `class` (`why` it was chosen, for the log).
    pub fn start(class: Class, why: &'static str) -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .thread_name("eru-http-queries")
            .build()?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("eru-http-queries".into())
            .spawn(move || {
                enter(class, why);
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

/// Puts the calling thread (and the threads it starts) in `class`, `why` it was chosen, and logs
/// the class it runs in: `SCHED_IDLE` failing (a sandbox's seccomp profile, say), nice
/// [`QUERY_NICE`] rather than the caller's priority.
fn enter(class: Class, why: &str) {
    let applied = match class {
        Class::Idle => idle_class().map(|()| Class::Idle).or_else(|e| {
            warn!(error = %e, "the HTTP API's query thread cannot take SCHED_IDLE; nice 19 instead");
            thread_nice(QUERY_NICE).map(|()| Class::Nice)
        }),
        Class::Nice => thread_nice(QUERY_NICE).map(|()| Class::Nice),
    };
    match applied {
        Ok(class) => info!(?class, why, "the HTTP API's journal queries' scheduling class"),
        Err(e) => warn!(error = %e, "the HTTP API's query thread keeps the operator's priority"),
    }
}

/// `SCHED_IDLE` for the calling thread (and the threads it starts): no privilege needed to lower.
fn idle_class() -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` outlives the call; with a thread id, sched_setscheduler changes that one
    // thread on Linux.
    let result = unsafe { libc::sched_setscheduler(libc::gettid(), libc::SCHED_IDLE, &param) };
    if result == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Nice `value` for the calling thread (and the threads it starts): no privilege needed to
/// lower it. The HTTP server's thread and the query thread both take theirs here.
pub(super) fn thread_nice(value: libc::c_int) -> std::io::Result<()> {
    // SAFETY: with a thread id, setpriority changes that one thread on Linux
    let result = unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, value) };
    if result == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
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
        let queries = QueryThread::start(Class::Idle, "a test").unwrap();
        let (here, child) = queries
            .run(async { (policy(), std::thread::spawn(policy).join().unwrap()) })
            .await
            .unwrap();
        assert_eq!((here, child), (libc::SCHED_IDLE, libc::SCHED_IDLE));
        // the caller's own thread keeps its class
        assert_eq!(policy(), mine);
    }

    /// The calling thread's nice value.
    fn nice() -> libc::c_int {
        // SAFETY: reads the calling thread's nice value (a thread id is a PRIO_PROCESS `who`)
        unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) }
    }

    #[tokio::test]
    async fn in_the_nice_class_work_runs_at_nice_19_and_threads_it_starts_inherit_it() {
        let mine = (policy(), nice());
        let queries = QueryThread::start(Class::Nice, "a test").unwrap();
        let (here, child) = queries
            .run(async {
                (
                    (policy(), nice()),
                    std::thread::spawn(|| (policy(), nice())).join().unwrap(),
                )
            })
            .await
            .unwrap();
        let lowest = (libc::SCHED_OTHER, QUERY_NICE);
        assert_eq!((here, child), (lowest, lowest));
        assert_eq!((policy(), nice()), mine);
    }

    #[test]
    fn auto_takes_the_idle_class_only_as_a_containers_first_process() {
        use crate::config::QueryClass;
        let class = |choice, pid| Class::chosen(choice, pid).0;
        assert_eq!(class(QueryClass::Auto, 1), Class::Idle);
        assert_eq!(class(QueryClass::Auto, 4242), Class::Nice);
        // a class named is taken as named
        assert_eq!(class(QueryClass::Idle, 4242), Class::Idle);
        assert_eq!(class(QueryClass::Nice, 1), Class::Nice);
    }

    #[tokio::test]
    async fn dropping_the_answer_cancels_the_work() {
        let queries = QueryThread::start(Class::Idle, "a test").unwrap();
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
