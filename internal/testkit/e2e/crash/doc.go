// Package crash holds the fault scenarios in which real processes die
// under load: ingest, pollers and the webhook receiver SIGKILLed at random
// and restarted by supervisors, ingest crashing between the provider's
// create answer and its record (TestChaosKillProcesses); the nats-server
// stopped while creates are in flight, and the leader of the job bucket of
// deploy/nats/cluster SIGKILLed mid-create (the *DuringCreates tests);
// ingest killed after the provider accepted a create, its successor
// finding the job at the provider (TestInDoubtCreateIsFoundAfterACrash).
// Every job must still end once, none be created twice, none be lost that
// the provider has.
//
// The binaries are built once for the package (e2etest.Binaries); -short
// skips these tests. POLLUX_CHAOS=long (make chaos) runs them ten times
// the size.
package crash
