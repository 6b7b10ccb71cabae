/** Real processes found by a marker in their command line (read from /proc), for tests that check what is left running. */
import { Effect } from "effect"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"

/** Processes whose command line holds `marker`. */
export const processesWith = (marker: string): ReadonlyArray<number> =>
  fs.readdirSync("/proc").filter((pid) => /^\d+$/.test(pid)).filter((pid) => {
    try {
      return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(marker)
    } catch {
      return false
    }
  }).map(Number)

/** A marker unique to one test; whatever still carries it when the test ends is killed. */
export const marked = Effect.acquireRelease(
  Effect.sync(() => `rx-test-${randomBytes(6).toString("hex")}`),
  (marker) => Effect.sync(() => processesWith(marker).forEach((pid) => process.kill(pid, "SIGKILL")))
)
