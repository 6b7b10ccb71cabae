/** Worker processes running test/fixtures/worker.mjs on the built packages; free ports for them. */
import { Deferred, Effect, type Scope } from "effect"
import { spawn } from "node:child_process"
import * as net from "node:net"
import { fileURLToPath } from "node:url"

const script = fileURLToPath(new URL("./fixtures/worker.mjs", import.meta.url))

export interface Exit {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

export interface Child {
  readonly pid: number
  readonly output: () => string
  /** Wait until stdout holds `text` (fails with what was printed if the child exits first or time runs out). */
  readonly waitFor: (text: string, timeoutMs?: number) => Effect.Effect<void, Error>
  readonly kill: (signal: NodeJS.Signals) => Effect.Effect<void>
  readonly exit: Effect.Effect<Exit>
}

/** Start `node worker.mjs <args>`; SIGKILLed with the scope if still running. */
export const start = (args: ReadonlyArray<string>): Effect.Effect<Child, never, Scope.Scope> =>
  Effect.gen(function*() {
    const exited = yield* Deferred.make<Exit>()
    const proc = yield* Effect.acquireRelease(
      Effect.sync(() => spawn(process.execPath, [script, ...args], { stdio: ["ignore", "pipe", "pipe"] })),
      (proc) => Effect.sync(() => proc.exitCode === null && proc.signalCode === null && proc.kill("SIGKILL"))
    )
    let output = ""
    const waiters = new Set<() => void>()
    const append = (chunk: string) => {
      output += chunk
      for (const wake of waiters) wake()
    }
    proc.stdout.setEncoding("utf8").on("data", append)
    proc.stderr.setEncoding("utf8").on("data", append)
    proc.on("exit", (code, signal) => {
      Deferred.unsafeDone(exited, Effect.succeed({ code, signal }))
      for (const wake of waiters) wake()
    })
    const seen = (text: string) =>
      Effect.async<void, Error>((resume) => {
        const check = () => {
          if (output.includes(text)) resume(Effect.void)
          else if (proc.exitCode !== null || proc.signalCode !== null) {
            resume(Effect.fail(new Error(`the worker exited before printing ${text}:\n${output}`)))
          } else return
          waiters.delete(check)
        }
        waiters.add(check)
        check()
        return Effect.sync(() => waiters.delete(check))
      })
    return {
      pid: proc.pid ?? -1,
      output: () => output,
      waitFor: (text, timeoutMs = 20_000) =>
        seen(text).pipe(
          Effect.timeoutFail({ duration: timeoutMs, onTimeout: () => new Error(`no ${text} within ${timeoutMs} ms:\n${output}`) })
        ),
      kill: (signal) => Effect.sync(() => proc.kill(signal)),
      exit: Deferred.await(exited)
    }
  })

/** A TCP port nothing listens on now, on 127.0.0.1. */
export const freePort: Effect.Effect<number> = Effect.async<number>((resume) => {
  const server = net.createServer()
  server.listen(0, "127.0.0.1", () => {
    const address = server.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    server.close(() => resume(Effect.succeed(port)))
  })
})
