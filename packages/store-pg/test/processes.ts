/** Child processes running test/fixtures/child.mjs on the built packages. */
import { Deferred, Effect, type Scope } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import { fileURLToPath } from "node:url"

const script = fileURLToPath(new URL("./fixtures/child.mjs", import.meta.url))
/** The child runs `dist/`: the package must be built (`pnpm build`). */
export const built = fileURLToPath(new URL("../dist/src/index.js", import.meta.url))
export const isBuilt = () => fs.existsSync(built)

export interface Exit {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
}

export interface Child {
  readonly pid: number
  readonly stdout: () => string
  /** What it printed on stdout, then on stderr. */
  readonly output: () => string
  /** Wait until stdout holds `text` (fails with what was printed if the child exits first or time runs out). */
  readonly waitFor: (text: string, timeoutMs?: number) => Effect.Effect<void, Error>
  /** Write a line to its stdin. */
  readonly send: (line: string) => Effect.Effect<void>
  readonly kill: (signal: NodeJS.Signals) => Effect.Effect<void>
  readonly exit: Effect.Effect<Exit>
}

/** Start `node child.mjs <args>`; SIGKILLed with the scope if still running. */
export const start = (args: ReadonlyArray<string>): Effect.Effect<Child, never, Scope.Scope> => startScript(script, args)

/** Start `node <file> <args>` (a fixture of this package or another's); SIGKILLed with the scope if still running. */
export const startScript = (file: string, args: ReadonlyArray<string>): Effect.Effect<Child, never, Scope.Scope> =>
  Effect.gen(function*() {
    const exited = yield* Deferred.make<Exit>()
    const proc = yield* Effect.acquireRelease(
      Effect.sync(() => spawn(process.execPath, [file, ...args], { stdio: ["pipe", "pipe", "pipe"] })),
      (proc) => Effect.sync(() => proc.exitCode === null && proc.signalCode === null && proc.kill("SIGKILL"))
    )
    let stdout = ""
    let stderr = ""
    const waiters = new Set<() => void>()
    proc.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      stdout += chunk
      for (const wake of waiters) wake()
    })
    proc.stderr.setEncoding("utf8").on("data", (chunk: string) => {
      stderr += chunk
    })
    proc.on("exit", (code, signal) => {
      Deferred.unsafeDone(exited, Effect.succeed({ code, signal, stdout, stderr }))
      for (const wake of waiters) wake()
    })
    const seen = (text: string) =>
      Effect.async<void, Error>((resume) => {
        const check = () => {
          if (stdout.includes(text)) resume(Effect.void)
          else if (proc.exitCode !== null || proc.signalCode !== null) {
            resume(Effect.fail(new Error(`the child exited before printing ${text}:\n${stdout}${stderr}`)))
          } else return
          waiters.delete(check)
        }
        waiters.add(check)
        check()
        return Effect.sync(() => waiters.delete(check))
      })
    return {
      pid: proc.pid ?? -1,
      stdout: () => stdout,
      output: () => `${stdout}${stderr}`,
      waitFor: (text, timeoutMs = 20_000) =>
        seen(text).pipe(
          Effect.timeoutFail({ duration: timeoutMs, onTimeout: () => new Error(`no ${text} within ${timeoutMs} ms:\n${stdout}${stderr}`) })
        ),
      send: (line) => Effect.sync(() => proc.stdin.write(`${line}\n`)),
      kill: (signal) => Effect.sync(() => proc.kill(signal)),
      exit: Deferred.await(exited)
    }
  })

/** Run the child to its end; SIGKILL it when it prints `KILLPOINT`, or after `killAfterMs`. */
export const run = (args: ReadonlyArray<string>, killAfterMs?: number): Effect.Effect<Exit> =>
  Effect.scoped(Effect.gen(function*() {
    const child = yield* start(args)
    const killer = Effect.raceFirst(
      Effect.orElse(child.waitFor("KILLPOINT\n", 600_000), () => Effect.never),
      killAfterMs === undefined ? Effect.never : Effect.sleep(killAfterMs)
    )
    return yield* Effect.raceFirst(child.exit, Effect.zipRight(killer, Effect.zipRight(child.kill("SIGKILL"), child.exit)))
  }))
