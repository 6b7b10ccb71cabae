/**
 * What a notification on the LISTEN session means to this store's followers. Each of the store's
 * own appends notifies too, and its notification comes back: it is no news, since the batch was
 * handed to the followers as it committed. So the store counts, by goal, the notifications of its
 * own appends still to come, counted before the commit so that none comes back uncounted, and a
 * notification it expects is passed over. Any other makes the goal's followers read the log.
 *
 * An error here may cost a read, never miss one: a notification of another session's commit that
 * arrives while an append of the same goal is in flight is taken for that append's, and the
 * append's own then makes the read. If the append fails, its own never comes, so the failure
 * makes the read instead.
 */
import type { Followers } from "@rx/kernel"
import { anyGoal, payloadOf } from "./listener.js"

export interface Echoes {
  /** Before an append of events to `goalId` commits. */
  readonly sending: (goalId: string) => void
  /** That append failed: it may have notified nothing. */
  readonly failed: (goalId: string) => void
  /** A notification for `goalId`, or (`undefined`) for any goal: a new LISTEN session, or an id too long to say. */
  readonly notified: (goalId: string | undefined) => void
}

export const make = (followers: Followers.Followers): Echoes => {
  const expected = new Map<string, number>()
  const count = (goalId: string, change: 1 | -1) => {
    const n = (expected.get(goalId) ?? 0) + change
    if (n > 0) expected.set(goalId, n)
    else expected.delete(goalId)
  }
  return {
    sending: (goalId) => {
      // A goal whose id does not fit in a payload notifies `anyGoal`, which always makes a read.
      if (payloadOf(goalId) !== anyGoal) count(goalId, 1)
    },
    failed: (goalId) => {
      if (payloadOf(goalId) !== anyGoal) count(goalId, -1)
      followers.changed(goalId)
    },
    notified: (goalId) => {
      if (goalId === undefined) {
        // Any goal may have moved: every follower reads, and the counts start again (a new session
        // delivers nothing the old one would have; a count dropped otherwise costs a read).
        expected.clear()
        return followers.changed()
      }
      if (expected.has(goalId)) return count(goalId, -1)
      followers.changed(goalId)
    }
  }
}
