/**
 * Signals while a goal runs. One SIGINT listener for the whole process: by default Ctrl-C
 * interrupts the command; a command may take it over for a while (`rx run` turns the first
 * Ctrl-C into a recorded cancel). SIGTERM is routed only while a goal runs (it then suspends the
 * goal instead of cancelling it).
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

/**
 * Route SIGTERM to `handler` for the scope's lifetime (a goal running: stop it gracefully).
 * Outside it, SIGTERM ends the process as Node does by default.
 */
export const onTerminate = (handler: () => void) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      process.on("SIGTERM", handler)
    }),
    () =>
      Effect.sync(() => {
        process.off("SIGTERM", handler)
      })
  )
