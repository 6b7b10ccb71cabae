/** Reading opened files in bounded chunks. */
import type { FileSystem } from "@effect/platform"
import type { PlatformError } from "@effect/platform/Error"
import { Effect, Option } from "effect"

/** Bytes read per call. */
export const chunkSize = 64 * 1024

/** Read a file from its current position to the end, one chunk at a time. */
export const forEachChunk = <E>(
  file: FileSystem.File,
  f: (chunk: Uint8Array) => Effect.Effect<void, E>
): Effect.Effect<void, E | PlatformError> =>
  Effect.gen(function*() {
    while (true) {
      const chunk = yield* file.readAlloc(chunkSize)
      if (Option.isNone(chunk)) return
      yield* f(chunk.value)
    }
  })

/** Read a whole file. */
export const readAll = (file: FileSystem.File): Effect.Effect<Uint8Array, PlatformError> =>
  Effect.gen(function*() {
    const chunks: Array<Uint8Array> = []
    yield* forEachChunk(file, (chunk) => Effect.sync(() => chunks.push(chunk)))
    return Buffer.concat(chunks)
  })
