/**
 * Releases that only undo this process's bookkeeping (a set, a queue), added to the scope as
 * they are. `Effect.acquireRelease` runs a release with the acquiring fiber's FiberRefs restored:
 * two diffs of every FiberRef, the context included, per release (a run's lease, every follower
 * of a goal); these releases read no FiberRef.
 */
import { Effect, Scope } from "effect"

/** `acquire`, then `release` of what it gave when the scope closes; as `Effect.acquireRelease`, acquired uninterruptibly. */
export const acquirePlain = <A, E, R>(
  acquire: Effect.Effect<A, E, R>,
  release: (acquired: A) => Effect.Effect<void>
): Effect.Effect<A, E, R | Scope.Scope> =>
  Effect.uninterruptible(Effect.flatMap(Effect.scope, (scope) => Effect.tap(acquire, (acquired) => Scope.addFinalizer(scope, release(acquired)))))
