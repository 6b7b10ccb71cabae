/** The watchers of goals in one process, by goal: an append looks only at those of its goal. */
export interface Watchers<W> {
  /** The watchers of `goalId`. */
  readonly of: (goalId: string) => Iterable<W>
  /** Every goal's watchers. */
  readonly all: () => Iterable<W>
  readonly add: (goalId: string, watcher: W) => void
  readonly remove: (goalId: string, watcher: W) => void
}

export const make = <W>(): Watchers<W> => {
  const byGoal = new Map<string, Set<W>>()
  return {
    of: (goalId) => byGoal.get(goalId) ?? [],
    all: function*() {
      for (const watchers of byGoal.values()) yield* watchers
    },
    add: (goalId, watcher) => {
      const watchers = byGoal.get(goalId) ?? new Set<W>()
      watchers.add(watcher)
      byGoal.set(goalId, watchers)
    },
    remove: (goalId, watcher) => {
      const watchers = byGoal.get(goalId)
      watchers?.delete(watcher)
      if (watchers?.size === 0) byGoal.delete(goalId)
    }
  }
}
