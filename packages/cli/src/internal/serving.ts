/**
 * `rx serve` and `rx worker`: `@rx/host`'s `Serve` listening until SIGTERM, SIGHUP or Ctrl-C, with what it says at start and stop.
 */
import type { FileSystem, Path } from "@effect/platform"
import * as Serve from "@rx/host/Serve"
import { Deferred, Effect, Either } from "effect"
import type * as Usage from "../Usage.js"
import { say } from "./goal.js"
import { onTerminate, terminating } from "./interrupt.js"

/**
 * Start (`start`), say so (`started`), then run until SIGTERM or SIGHUP, or Ctrl-C (which
 * interrupts the command, bin.ts). The signals are routed here before the start: during it, one
 * stops the start (what was set up closes with the scope, runs already going record where they
 * are) and is given back (`Left`); after it, the command goes on to stop. A second signal ends
 * the process at once.
 */
const untilStopped = <A, E, R>(start: Effect.Effect<A, E, R>, started: (a: A) => Effect.Effect<void>) =>
  Effect.gen(function*() {
    const stop = yield* Deferred.make<NodeJS.Signals>()
    const first = (signal: NodeJS.Signals) => {
      for (const s of terminating) process.off(s, first)
      Effect.runFork(Deferred.succeed(stop, signal))
    }
    yield* onTerminate(first)
    const up = yield* Effect.raceFirst(Effect.map(start, Either.right), Effect.map(Deferred.await(stop), Either.left))
    if (Either.isRight(up)) {
      yield* started(up.right)
      yield* Deferred.await(stop)
    }
    return up
  })

export const serve = (flags: Usage.Input<typeof Usage.serve>): Effect.Effect<void, unknown, FileSystem.FileSystem | Path.Path> =>
  Effect.gen(function*() {
    let serving: Serve.Serving | undefined
    yield* Effect.scoped(Effect.gen(function*() {
      const up = yield* untilStopped(Serve.serve({ ...flags, given: flags.settings }), (s) => {
        serving = s
        const address = s.url === `http://${s.host}:${s.port}` ? s.url : `${s.host} port ${s.port} (${s.url} from this machine)`
        return say([
          `rx serve: listening on ${address} (goals in ${s.workspace}, model ${s.model}, log ${s.db.label}${s.cluster ? ", run by the cluster's workers" : ""})`,
          s.token.kept === "env"
            ? "  token: RX_TOKEN"
            : `  token: in ${s.token.file}, ${s.token.kept === "reused" ? "kept from the last start (--new-token makes a new one)" : "new"} (send it as Authorization: Bearer <token>)`,
          `  inspector: open ${s.url}/ in a browser (it asks for the token once)`,
          s.cluster
            ? "  Ctrl-C or SIGTERM stops it; the workers go on with the goals"
            : "  Ctrl-C or SIGTERM stops it; running goals stay open, recorded, and resume at the next start"
        ].join("\n"))
      })
      yield* say(Either.isRight(up) ? "rx serve: stopping: the runs in flight record where they are" : startStopped("rx serve", up.left))
    })).pipe(
      // Said once everything is closed (the runs stopped, the log closed), however it stopped.
      Effect.ensuring(Effect.suspend(() =>
        serving === undefined
          ? Effect.void
          : say(`rx serve: stopped; ${serving.cluster ? "the workers go on with the goals" : "open goals stay recorded and resume at the next start"}`)
      ))
    )
  })

/** What a command stopped by a signal while it started says. */
const startStopped = (command: string, signal: NodeJS.Signals) => `${command}: stopped while it started (${signal}); what it had started is closed`

export const worker = (flags: Usage.Input<typeof Usage.worker>): Effect.Effect<void, unknown, FileSystem.FileSystem | Path.Path> =>
  Effect.scoped(Effect.gen(function*() {
    const up = yield* untilStopped(Serve.worker({ ...flags, given: flags.settings }), (w) =>
      say([
        `rx worker: on ${w.host}:${w.port}, goals of ${w.db.label}, ${w.concurrency} at once, model ${w.model}`,
        `  workspace root ${w.volume.root} (volume ${w.volume.id}); failover ${w.failoverSeconds} s`,
        `  Ctrl-C or SIGTERM drains it: its goals have ${w.drainSeconds} s to end, then go on on the other workers`
      ].join("\n")))
    if (Either.isLeft(up)) yield* say(startStopped("rx worker", up.left))
  }))
