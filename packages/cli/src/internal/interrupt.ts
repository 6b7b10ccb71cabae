/**
 * One SIGINT listener for the whole process. By default Ctrl-C interrupts the command; a
 * command may take it over for a while (`rx run` turns the first Ctrl-C into a recorded cancel).
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
