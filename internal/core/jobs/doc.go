// Package jobs is the one owner of every job Pollux tracks: the only code
// that reads or writes a job's record (the jobs bucket), its events (the
// record's outbox and the events stream), its check message (the checks
// stream) and its poll counters. The services observe and decide — ingest
// what a submission needs, the poller what follows a poll, the webhook
// applier what a delivery says — and hand the owner their decisions as
// values (Created, Fold and Decision, Notice, an Observation); the owner
// writes, publishes and settles.
//
// # One job's life
//
// Ingest's writes, then the poller's, as Example runs them. Every write is
// compare-and-set on the revision read (Create first, then Update), and
// first settles what earlier writers left in the outbox; a write appends
// its events to the outbox and its writer publishes them after it.
//
//	verb               record (jobs bucket)    check (checks stream)      outbox -> events stream
//	Accept             Create  rev 1 pending   -                          (waiting, when held)
//	Attempt            Update  rev 2 attempt   -
//	Submitted          Update  rev 3 queued    arm #1, due at the 1st     submitted, published;
//	                                           poll                       #1 says up to which seq
//	Open, Wait         -                       #1 delivery 1 waits:       -
//	                                           nak-delayed, or parked by
//	                                           its holder when far
//	Polled, quiet      -  no write             #1 delivery n: nak-delayed -
//	                                           (its deliveries count it)
//	Polled, changed    Update  rev 4 running   replace #1 by #2 (names    settle, then running,
//	                                           the seq it replaces)       published
//	Polled, ended      Update  rev 5 succeeded end #2 (Term)              succeeded, published
//	                   polls final                                        however long NATS is away
//
// Each service sees the owner through its view (views.go), which holds
// the verbs it hands its decisions with and the two reads every service
// has (Get, Tracer); the Owner itself keeps the readers' verbs and hands
// the views out. Each group is one file, with a header:
//
//	caller    view                  verbs                                   file
//	ingest    Owner.Intake()        Accept Hold Attempt Submitted           intake.go
//	                                IndexRemote Refused Failed Requeue End
//	                                Canceled RequestCancelBy Resume
//	                                Reject Read
//	poller    Owner.Polls()         Open Wait Postpone Polled Settle;       poll.go
//	                                Delivery.Fold
//	webhook   Owner.Webhooks()      ByRemote Webhook Hint                   webhook.go
//	custody   Owner.Custody()       SaveOutputs OutputsExpiring             custody.go
//	cancels   the Owner (and        RequestCancel (RequestCancelBy)          cancel.go
//	          Intake): front door,  Withdraw (the front door's: a
//	          ingest                submission it answered 503 in doubt)
//	readers   the Owner             Get Each Check Namespace Tracer         read.go
//
// End takes a Guard: Always, UnlessSubmitted (withdraw a job that never
// reached the provider) or UnlessSettled (give up on a submission still
// in doubt).
//
// # A job's record
//
// A JSON state.Job under the job's id. A Record is a record with the
// revision the owner read it at: services hold it between two decisions on
// the same job and hand it back, so the next write needs no read when
// nobody wrote the job meanwhile. NATS errors end here, translated into
// state.ErrNotFound, ErrExists and ErrConflict; a replica's "not found" is
// confirmed by the bucket's leader first.
//
// # Its events
//
// Events go out with Nats-Msg-Id job:seq. Nothing writes again just to
// empty the outbox: the next write empties it, after making sure its
// events are out (the check says up to which seq they were published;
// else the job's latest event in the stream says). One write per change.
// Every writer settles what earlier writers left before it makes its own
// change, even when it then writes nothing: a job's end may be in its
// record only (its writer died before publishing it), and whoever ends
// the job's check is the last to look. An end is a result in hand: the
// poller that ends a job publishes the end however long NATS is away (a
// stop leaves the check out, for its next poll to publish it), and an
// outsider whose end cannot be published fails, keeping the check, for
// its retry to publish it.
//
// # Its check
//
// A tracked job has exactly one check message, its poll timer: the stream
// keeps one message per job subject, and every publish names the message
// it replaces, so a replacement is atomic and nothing leaves a job without
// a check in between. The check carries the job's poll state
// (events.PollState). A poll that learns nothing writes nothing: the check
// goes back with NakWithDelay, and the polls it made since it was
// published are its deliveries. Every verifyEvery (32) quiet polls, Open
// reads the record all the same: a safety net for a job that ended while
// its check stayed.
//
// Only a holder parks. A check whose next poll is ParkAfter or more away
// is published by its holder, with every poll so far counted, as a
// message schedule on the job's parked subject — expecting the check it
// holds to be the job's latest, so a check replaced meanwhile is not
// parked — and its delivery ends. The schedule fires shortly before the
// poll is due onto the check subject. An outsider replacing a parked
// check publishes on the check subject and deletes the parked one (when it
// fired meanwhile, the check it fired replaced the outsider's, which
// replaces that in turn); one removing it deletes the parked check and
// what its parker left on the check subject. A fire already under way
// when an outsider removes the parked check still lands: its first poll
// ends it when the provider says the job ended (one status call more),
// else the record's read at the job's 32nd quiet poll does.
//
// # Counting polls
//
// A job's polls are counted in one place: its check (its content and its
// deliveries), copied into the record at every write; a terminal job's
// record has them all. Only the holder of a delivery sees the polls a
// check made since it was published, so a writer that ends or moves a
// job's check from outside (a webhook, a cancel, a callback) needs a check
// whose content counts every poll: a check of a job that expects a
// webhook (each of its polls publishes a new check), a parked check, or a
// check whose first poll is not due yet. Any other it leaves for the
// poller: the job ends at once (its events are out), the record says
// PollsOpen, and the check's next delivery makes one status call,
// confirming the end, adds its polls and ends. The Terminal hook sees each
// job once, with its final count.
//
// The count is exact (e2etest.RequireExactPolls checks it in every
// end-to-end scenario, allowing the first case below, which a loaded
// machine meets, in a few jobs of a run) but for three cases, each
// bounded:
//
//	exception                                     bound                guarded by
//	a delivery lost in transit (a restart, a      one poll per lost    TestALostDeliveryCountsOnePoll;
//	failover, its holder died) counts as a poll   delivery             TestChaosClusterFailover (e2e)
//	a route repartitioned while a check waits     the quiet polls of   TestRepartitionLosesNothing (e2e);
//	hands it over as a new check                  the check handed     TestAParkedCheckFollowsARepartition
//	                                              over                 (a parked check keeps its count)
//	a poll under way when a hint brings a         one poll             TestAHintLeavesOnePollUncounted
//	counted check forward goes uncounted
//
// # Invariants and the tests that guard them
//
//	every write is compare-and-set                    TestStoreMutateConcurrent, TestStoreMutateFromARecord
//	one write per change                              TestSubmissionWritesTwice
//	every writer settles the outbox first             TestAPollPublishesAnEndADeadWriterLeft,
//	                                                  TestADuplicateDeliveryPublishesAnEndADeadWriterLeft
//	each event is published once                      TestUnpublishedEventsArePublishedOnce,
//	                                                  TestAnEventInTheStreamIsNotRepeated
//	an end is a result in hand                        TestAnEndThatCannotBePublishedKeepsItsCheck,
//	                                                  TestAWebhookEndThatCannotBePublishedIsRetried
//	one check per job                                 TestTrackedJobIsArmedOnce, TestParkingLeavesOneCheck
//	a quiet poll writes nothing, its check counts it  TestQuietPollsAreCountedByTheCheck
//	a webhook job's polls are in its check            TestPollsOfAWebhookJobAreInItsCheck
//	a postponed delivery is no poll                   TestPostponeDoesNotCount
//	only a holder parks; an outsider un-parks         TestAFarPollParksItsCheck,
//	                                                  TestABroughtForwardParkedCheckDoesNotFire
//	an outsider leaves an uncounted check to the      TestAnEndByAnOutsiderIsSettledByThePoller
//	poller (PollsOpen)
//	the record is read every 32 quiet polls           TestQuietPollsReadTheRecordEvery32,
//	                                                  TestAParkedChecksQuietPollsReadTheRecord
//	an acceptance is never thrown away                TestSubmittedOutlastsANATSRestart
//	a withdrawn submission makes no job               TestAWithdrawEndsTheJobBeforeIngestMakesIt,
//	                                                  TestAModelRoutesWithdrawnJobMakesNothing (ingest)
//
// # Results in hand
//
// A provider's acceptance of a job is never thrown away: Submitted retries
// its write, however long NATS is away, until it lands or the caller's
// context ends (a graceful stop gives a handler its drain time). A submit
// attempt is marked in the record before its call (with a random attempt
// id, so that a mark whose answer was lost is known by its writer), and a
// process that dies during the call leaves the attempt in doubt for ingest
// to resolve.
package jobs
