//! The pool behaviour jobs run on: [`pool`] (start there) runs the jobs a [`Jobs`] gives, up to
//! its width at once on each of its lanes (a lane a cell), the next starting as soon as one
//! ends.

use futures::StreamExt;

/// Jobs for [`pool`]: where they come from, what they need, and where their results go.
pub(super) trait Jobs {
    /// A job to start.
    type Job;
    /// What a job gives when it ends.
    type Done;
    /// The next job to start, if one may start now.
    fn next(&mut self) -> anyhow::Result<Option<Self::Job>>;
    /// A job that waited for room: itself if it may still start, else none (the jobs take it
    /// back).
    fn keep(&mut self, job: Self::Job) -> anyhow::Result<Option<Self::Job>>;
    /// How many of a lane's places `job` takes (at least one).
    fn places(&self, job: &Self::Job) -> usize;
    /// Whether `job` runs alone on its lane: once nothing else runs there, and nothing beside
    /// it there.
    fn alone(&self, job: &Self::Job) -> bool;
    /// Each lane's places now.
    fn width(&self) -> usize;
    /// How many lanes there are (at least one; each a cell, its jobs independent of the
    /// other lanes').
    fn lanes(&self) -> usize {
        1
    }
    /// Takes the result of a job that ended, `full` whether every place of its lane was
    /// taken as it did.
    async fn done(&mut self, done: Self::Done, full: bool) -> anyhow::Result<()>;
}

/// Runs the jobs of `jobs`, each started with `start` on a lane, keeping up to [`Jobs::width`]
/// places of each of the [`Jobs::lanes`] taken: when a job ends, its result goes to
/// [`Jobs::done`] at once and the next job starts, so that no job waits for a slower one. A job
/// goes to the lane with the fewest places taken among those it fits in. A job that runs alone
/// waits until nothing runs on a lane and nothing starts beside it there; a job that needs more
/// places than any lane has free waits for them (nothing starts before it meanwhile). Ends once
/// nothing runs and nothing may start.
pub(super) async fn pool<'f, J: Jobs>(
    jobs: &mut J,
    start: impl Fn(J::Job, usize) -> futures::future::LocalBoxFuture<'f, J::Done>,
) -> anyhow::Result<()> {
    let lanes = jobs.lanes().max(1);
    let mut running = futures::stream::FuturesUnordered::new();
    let (mut taken, mut alone) = (vec![0usize; lanes], vec![false; lanes]);
    let mut waiting: Option<J::Job> = None;
    loop {
        loop {
            let width = jobs.width();
            let room = (0..lanes).any(|l| !alone[l] && taken[l] < width);
            let job = match waiting.take() {
                Some(job) => match jobs.keep(job)? {
                    Some(job) => job,
                    None => continue,
                },
                None if room => match jobs.next()? {
                    Some(job) => job,
                    None => break,
                },
                None => break,
            };
            let (places, by_itself) = (jobs.places(&job).max(1), jobs.alone(&job));
            let fits = |l: &usize| {
                taken[*l] == 0 || (!by_itself && !alone[*l] && taken[*l] + places <= width)
            };
            let Some(lane) = (0..lanes).filter(fits).min_by_key(|l| taken[*l]) else {
                waiting = Some(job);
                break;
            };
            taken[lane] += places;
            alone[lane] = by_itself;
            let run = start(job, lane);
            running.push(async move { (lane, places, by_itself, run.await) });
        }
        let Some((lane, places, by_itself, done)) = running.next().await else {
            return Ok(());
        };
        let full = taken[lane] >= jobs.width();
        taken[lane] -= places;
        alone[lane] &= !by_itself;
        jobs.done(done, full).await?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;
    use std::time::Duration;

    /// A job of a [`pool`] test: its number, seconds, whether it runs alone, its places.
    type FakeJob = (usize, u64, bool, usize);

    /// When a [`pool`] test's job ran: its number, start and end (seconds), places, alone,
    /// lane.
    type Ran = (usize, f64, f64, usize, bool, usize);

    /// Jobs of a [`pool`] test: each lasts its seconds on tokio's paused clock; after the
    /// `n`-th ends, the width becomes `w` (`widen`).
    struct Fake {
        jobs: std::collections::VecDeque<FakeJob>,
        width: usize,
        widen: Option<(usize, usize)>,
        ended: usize,
        lanes: usize,
    }

    impl Jobs for Fake {
        type Job = FakeJob;
        type Done = usize;
        fn next(&mut self) -> anyhow::Result<Option<FakeJob>> {
            Ok(self.jobs.pop_front())
        }
        fn keep(&mut self, job: FakeJob) -> anyhow::Result<Option<FakeJob>> {
            Ok(Some(job))
        }
        fn places(&self, job: &FakeJob) -> usize {
            job.3
        }
        fn alone(&self, job: &FakeJob) -> bool {
            job.2
        }
        fn width(&self) -> usize {
            self.width
        }
        fn lanes(&self) -> usize {
            self.lanes
        }
        async fn done(&mut self, _: usize, _: bool) -> anyhow::Result<()> {
            self.ended += 1;
            if let Some((n, w)) = self.widen
                && n == self.ended
            {
                self.width = w;
            }
            Ok(())
        }
    }

    /// Runs `jobs` on a pool of one lane `width` wide (changed as `widen` says): when each
    /// ran, by number.
    async fn run_fake(jobs: &[FakeJob], width: usize, widen: Option<(usize, usize)>) -> Vec<Ran> {
        run_lanes(jobs, width, widen, 1).await
    }

    /// As [`run_fake`], on `lanes` lanes.
    async fn run_lanes(
        jobs: &[FakeJob],
        width: usize,
        widen: Option<(usize, usize)>,
        lanes: usize,
    ) -> Vec<Ran> {
        let t0 = tokio::time::Instant::now();
        let ran = std::cell::RefCell::new(vec![]);
        let mut fake = Fake {
            jobs: jobs.iter().copied().collect(),
            width,
            widen,
            ended: 0,
            lanes,
        };
        pool(&mut fake, |(n, seconds, alone, places), lane| {
            let ran = &ran;
            async move {
                let start = t0.elapsed().as_secs_f64();
                tokio::time::sleep(Duration::from_secs(seconds)).await;
                let end = t0.elapsed().as_secs_f64();
                ran.borrow_mut().push((n, start, end, places, alone, lane));
                n
            }
            .boxed_local()
        })
        .await
        .unwrap();
        let mut ran = ran.into_inner();
        ran.sort_by_key(|r| r.0);
        ran
    }

    /// The places taken at second `at` by the jobs of `ran` running then.
    fn taken_at(ran: &[Ran], at: f64) -> usize {
        ran.iter()
            .filter(|r| r.1 <= at && at < r.2)
            .map(|r| r.3)
            .sum()
    }

    /// As [`taken_at`], on lane `lane` only.
    fn taken_on(ran: &[Ran], lane: usize, at: f64) -> usize {
        let on: Vec<Ran> = ran.iter().copied().filter(|r| r.5 == lane).collect();
        taken_at(&on, at)
    }

    #[tokio::test(start_paused = true)]
    async fn lanes_fill_evenly_and_a_job_alone_holds_only_its_own_lane() {
        // Two lanes two wide: four quick jobs start at once, two a lane.
        let quick: Vec<FakeJob> = (0..4).map(|n| (n, 1, false, 1)).collect();
        let ran = run_lanes(&quick, 2, None, 2).await;
        assert!(ran.iter().all(|r| r.1 == 0.0), "{ran:?}");
        assert_eq!((taken_on(&ran, 0, 0.5), taken_on(&ran, 1, 0.5)), (2, 2));
        // A job alone waits for a lane to empty, and the other lane goes on beside it.
        let jobs = [
            (0, 4, false, 1),
            (1, 2, false, 1),
            (2, 3, true, 1),
            (3, 1, false, 1),
            (4, 1, false, 1),
            (5, 1, false, 1),
        ];
        let ran = run_lanes(&jobs, 1, None, 2).await;
        let alone = ran[2];
        assert_eq!((alone.1, alone.2), (2.0, 5.0), "{ran:?}");
        assert_eq!(alone.5, ran[1].5, "on the lane that emptied first");
        for r in ran.iter().filter(|r| r.0 != 2 && r.5 == alone.5) {
            assert!(r.2 <= alone.1 || r.1 >= alone.2, "{r:?} ran beside it");
        }
        // Jobs after it ran on the other lane as soon as the slow one ended.
        assert_eq!(ran[3].1, 4.0, "{ran:?}");
        assert_ne!(ran[3].5, alone.5);
        assert!((0..8).all(|t| taken_at(&ran, t as f64 + 0.5) <= 2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_pool_starts_the_next_job_as_one_ends_without_waiting_for_the_slowest() {
        let mut jobs = vec![(0, 10, false, 1)];
        jobs.extend((1..10).map(|n| (n, 1, false, 1)));
        let ran = run_fake(&jobs, 2, None).await;
        assert_eq!(ran.len(), 10);
        // The slow one holds one place; the other runs the quick ones back to back.
        assert_eq!(ran[0].2, 10.0);
        for (n, r) in ran.iter().enumerate().skip(1) {
            assert_eq!(
                r.1,
                (n - 1) as f64,
                "job {n} starts as the one before it ends"
            );
        }
        assert!((0..10).all(|t| taken_at(&ran, t as f64 + 0.5) <= 2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_job_that_runs_alone_waits_for_an_empty_pool_and_nothing_runs_beside_it() {
        let jobs = [
            (0, 3, false, 1),
            (1, 2, false, 1),
            (2, 1, true, 1),
            (3, 2, false, 1),
            (4, 2, false, 1),
        ];
        let ran = run_fake(&jobs, 3, None).await;
        let alone = ran[2];
        assert_eq!(
            (alone.1, alone.2),
            (3.0, 4.0),
            "it starts once both have ended"
        );
        for r in ran.iter().filter(|r| r.0 != 2) {
            assert!(r.2 <= alone.1 || r.1 >= alone.2, "{r:?} ran beside it");
        }
        // Nothing started while it waited, though a place was free; after it, the pool refills.
        assert_eq!((ran[3].1, ran[4].1), (4.0, 4.0));
    }

    #[tokio::test(start_paused = true)]
    async fn a_pool_follows_its_width_and_a_job_waits_for_the_places_it_needs() {
        let jobs = [
            (0, 1, false, 1),
            (1, 1, false, 1),
            (2, 1, false, 1),
            (3, 1, false, 1),
            (4, 1, false, 3),
            (5, 1, false, 1),
        ];
        let ran = run_fake(&jobs, 1, Some((1, 3))).await;
        // One at a time until the first ends, then three.
        assert_eq!(ran[1].1, 1.0);
        assert_eq!((ran[2].1, ran[3].1), (1.0, 1.0));
        // The job of three places waits for all three, and the next for it.
        assert_eq!(ran[4].1, 2.0);
        assert_eq!(
            ran[5].1, 3.0,
            "and the next waits for it: it takes the three places"
        );
        assert!((0..4).all(|t| taken_at(&ran, t as f64 + 0.5) <= 3));
    }
}
