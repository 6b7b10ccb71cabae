/**
 * `rx serve` and `rx worker`: `@rx/host`'s `Serve` listening until SIGTERM or Ctrl-C, with what it says at start and stop.
 */
import type { FileSystem, Path } from "@effect/platform"
import * as Serve from "@rx/host/Serve"
import { Deferred, Effect } from "effect"
import type { Flags } from "../Commands.js"
import { say } from "./goal.js"
import { onTerminate } from "./interrupt.js"

/** Until SIGTERM (routed here) or Ctrl-C (which interrupts the command, bin.ts). */
const untilStopped = Effect.gen(function*() {
  const stop = yield* Deferred.make<void>()
  yield* onTerminate(() => Effect.runFork(Deferred.succeed(stop, undefined)))
  yield* Deferred.await(stop)
})

export const serve = (flags: Flags): Effect.Effect<void, unknown, FileSystem.FileSystem | Path.Path> =>
  Effect.gen(function*() {
    let serving: Serve.Serving | undefined
    yield* Effect.scoped(Effect.gen(function*() {
      const s = yield* Serve.serve({ ...flags, given: flags.settings })
      serving = s
      const address = s.url === `http://${s.host}:${s.port}` ? s.url : `${s.host} port ${s.port} (${s.url} from this machine)`
      yield* say([
        `rx serve: listening on ${address} (goals in ${s.workspace}, model ${s.model}, log ${s.db.label}${s.cluster ? ", run by the cluster's workers" : ""})`,
        s.token.kept === "env"
          ? "  token: RX_TOKEN"
          : `  token: in ${s.token.file}, ${s.token.kept === "reused" ? "kept from the last start (--new-token makes a new one)" : "new"} (send it as Authorization: Bearer <token>)`,
        `  inspector: open ${s.url}/ in a browser (it asks for the token once)`,
        s.cluster
          ? "  Ctrl-C or SIGTERM stops it; the workers go on with the goals"
          : "  Ctrl-C or SIGTERM stops it; running goals stay open, recorded, and resume at the next start"
      ].join("\n"))
      yield* untilStopped
      yield* say("rx serve: stopping: the runs in flight record where they are")
    })).pipe(
      // Said once everything is closed (the runs stopped, the log closed), however it stopped.
      Effect.ensuring(Effect.suspend(() =>
        serving === undefined
          ? Effect.void
          : say(`rx serve: stopped; ${serving.cluster ? "the workers go on with the goals" : "open goals stay recorded and resume at the next start"}`)
      ))
    )
  })

export const worker = (flags: Flags): Effect.Effect<void, unknown, FileSystem.FileSystem | Path.Path> =>
  Effect.scoped(Effect.gen(function*() {
    const w = yield* Serve.worker({ ...flags, given: flags.settings })
    yield* say([
      `rx worker: on ${w.host}:${w.port}, goals of ${w.db.label}, ${w.concurrency} at once, model ${w.model}`,
      `  workspace root ${w.volume.root} (volume ${w.volume.id}); failover ${w.failoverSeconds} s`,
      `  Ctrl-C or SIGTERM drains it: its goals have ${w.drainSeconds} s to end, then go on on the other workers`
    ].join("\n"))
    yield* untilStopped
  }))

