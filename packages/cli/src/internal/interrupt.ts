/**
 * Signals while a goal runs. One SIGINT listener for the whole process: by default Ctrl-C
 * interrupts the command; a command may take it over for a while (`rx run` turns the first
 * Ctrl-C into a recorded cancel). SIGTERM and SIGHUP are routed only while a goal runs (they then
 * suspend the goal instead of cancelling it).
 */
import { Effect } from "effect"

let current: (() => void) | undefined

/** Route Ctrl-C to `handler` for the scope's lifetime. */
export const takeOver = (handler: () => void) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      current = handler
    }),
    () =>
      Effect.sync(() => {
        current = undefined
      })
  )

/** The process-wide listener; `fallback` runs when no command took Ctrl-C over. */
export const listener = (fallback: () => void) => () => (current === undefined ? fallback() : current())

/** What stops a run gracefully: SIGTERM, and SIGHUP (the terminal or the SSH session that ran rx closed). */
export const terminating: ReadonlyArray<NodeJS.Signals> = ["SIGTERM", "SIGHUP"]

/**
 * Route SIGTERM and SIGHUP to `handler` for the scope's lifetime (a goal running: stop it
 * gracefully, so that its calls in flight are stopped and recorded, not left running). Outside
 * it, they end the process as Node does by default.
 */
export const onTerminate = (handler: (signal: NodeJS.Signals) => void) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      for (const signal of terminating) process.on(signal, handler)
    }),
    () =>
      Effect.sync(() => {
        for (const signal of terminating) process.off(signal, handler)
      })
  )
