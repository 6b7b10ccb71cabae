/**
 * `write_file {path, content, expected_sha256?, allow_placeholder?, allow_shrink?}`: create or
 * overwrite a file, atomically (temp file in the same folder, fsync, rename).
 *
 * - Creating a file needs no `expected_sha256`; giving one for a missing file is a `StaleFile`.
 * - Overwriting needs `expected_sha256` equal to the file's current sha256 (from `read_file`),
 *   otherwise a `StaleFile` error carries both hashes.
 * - Content with placeholder lines that stand for omitted code ("// ... rest of the code
 *   unchanged", a bare "...", "(truncated)") is refused unless `allow_placeholder` is true; rx's
 *   own cut markers ("[... 3000 characters omitted ...]") are refused always. Lines the old file
 *   already had do not count.
 * - An overwrite that removes more than half of the file's bytes is refused unless `allow_shrink`.
 * - Content over `maxWriteBytes` is refused before anything is written.
 * - The temp file is named after the call, so that after a crash `recover` removes it, and
 *   records the call as done when the file holds exactly the content it was to write.
 */
import { Tool } from "@rx/kernel"
import { Effect, Option, Schema } from "effect"
import * as NodePath from "node:path"
import { ToolsConfig } from "./Config.js"
import * as Errors from "./internal/errors.js"
import * as Files from "./internal/files.js"
import * as Text from "./internal/text.js"
import { failure, StaleFile, Workspace } from "./Workspace.js"

/** A write the safety rules refuse; the call may say it is intended. */
export class UnsafeWrite extends Schema.TaggedError<UnsafeWrite>()("@rx/tools/UnsafeWrite", {
  path: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `write to "${this.path}" refused: ${this.reason}`
  }
}

/** A sha256 as lowercase hex. */
export const Sha256 = Schema.String.pipe(Schema.pattern(/^[0-9a-f]{64}$/)).annotations({
  description: "sha256 of the file's current content, as read_file returned it (64 lowercase hex digits)."
})

export const Input = Schema.Struct({
  path: Schema.String.annotations({ description: "File path, relative to the workspace root." }),
  content: Schema.String.annotations({ description: "The complete new content of the file." }),
  expected_sha256: Schema.optional(Sha256),
  allow_placeholder: Schema.optional(Schema.Boolean).annotations({
    description: "Write even though the content has placeholder lines such as \"... rest of the code unchanged\"."
  }),
  allow_shrink: Schema.optional(Schema.Boolean).annotations({
    description: "Overwrite even though the new content is less than half the size of the old."
  })
})
export type Input = typeof Input.Type

export const Output = Schema.Struct({
  path: Schema.String,
  resolved_path: Schema.String,
  /** True when the file did not exist before. */
  created: Schema.Boolean,
  /** sha256 of the new content: the `expected_sha256` of the next write. */
  sha256: Schema.String,
  /** sha256 of the content replaced; null when created. */
  previous_sha256: Schema.NullOr(Schema.String),
  bytes: Schema.Int,
  lines: Schema.Int
})
export type Output = typeof Output.Type

/** The precondition of an overwrite-style call: the file must have the hash the caller saw. */
export const checkPrecondition = (
  path: string,
  current: Option.Option<{ readonly sha256: string }>,
  expected: string | undefined,
  mode: "create-or-overwrite" | "edit"
): Effect.Effect<void, StaleFile> =>
  Option.match(current, {
    onNone: () =>
      expected === undefined
        ? Effect.void
        : Effect.fail(
          new StaleFile({
            path,
            expected,
            actual: null,
            reason: mode === "edit" ? "the file does not exist" : "the file does not exist; omit expected_sha256 to create it"
          })
        ),
    onSome: ({ sha256 }) =>
      expected === undefined
        ? Effect.fail(
          new StaleFile({
            path,
            expected: null,
            actual: sha256,
            reason: "the file exists: read it first and pass its sha256 as expected_sha256 to change it"
          })
        )
        : expected === sha256
        ? Effect.void
        : Effect.fail(
          new StaleFile({ path, expected, actual: sha256, reason: "the file changed since it was read; read it again" })
        )
  })

/**
 * Refuse placeholder lines that `next` adds over `previous`, unless `allowed`; refuse rx's own
 * cut markers that it adds whatever the call says.
 */
export const checkPlaceholders = (
  path: string,
  previous: string,
  next: string,
  allowed: boolean | undefined
): Effect.Effect<void, UnsafeWrite> => {
  const markers = Text.newRxMarkers(previous, next)
  if (markers.length > 0) {
    return Effect.fail(
      new UnsafeWrite({
        path,
        reason: `the content holds a marker rx puts where it cut text (${
          markers.slice(0, 3).map((line) => JSON.stringify(line.slice(0, 80))).join(", ")
        }), so it was copied from a shortened view and would lose what was cut; read the full text (read_file with offset and limit) and write it complete`
      })
    )
  }
  if (allowed === true) return Effect.void
  const added = Text.newPlaceholders(previous, next, NodePath.basename(path))
  if (added.length === 0) return Effect.void
  return Effect.fail(
    new UnsafeWrite({
      path,
      reason: `the content has placeholder lines that stand for omitted code (${
        added.slice(0, 3).map((line) => JSON.stringify(line)).join(", ")
      }); write the complete content, or set allow_placeholder: true if these lines are meant literally`
    })
  )
}

/** Refuse a write that would make a file hold more than `limit` bytes. */
export const checkSize = (path: string, bytes: number, limit: number): Effect.Effect<void, UnsafeWrite> =>
  bytes <= limit
    ? Effect.void
    : Effect.fail(
      new UnsafeWrite({
        path,
        reason: `the file would hold ${bytes} bytes, more than the limit of ${limit} bytes (maxWriteBytes); write less, or split the content into several files`
      })
    )

/**
 * The current content of a file for recovery, if it is a regular file of at most `limit` bytes:
 * `None` when there is no such file.
 */
export const readForRecovery = (path: string, limit: number) =>
  Effect.scoped(Effect.gen(function*() {
    const workspace = yield* Workspace
    const opened = yield* workspace.open(path).pipe(
      Effect.map(Option.some),
      Effect.catchTags({
        "@rx/tools/FileNotFound": () => Effect.succeedNone,
        "@rx/tools/WrongType": () => Effect.succeedNone
      })
    )
    if (Option.isNone(opened) || Number(opened.value.info.size) > limit) return Option.none()
    const bytes = yield* Files.readAll(opened.value.file).pipe(Effect.mapError(failure(path, "read")))
    return Option.some({ resolved: opened.value.resolved, bytes })
  }))

export const tool = Tool.make({
  name: "write_file",
  description:
    "Create or overwrite a file in the workspace, atomically. Overwriting needs expected_sha256, the file's sha256 from read_file. Write the complete content: placeholder content (\"... rest of the code unchanged\", \"(truncated)\") and overwrites that remove more than half of a file are refused unless allow_placeholder / allow_shrink is true, and text copied from a view rx shortened (\"[... N characters omitted ...]\") is always refused.",
  input: Input,
  output: Output,
  idempotent: false,
  execute: (input, context) =>
    Effect.gen(function*() {
      const config = yield* ToolsConfig
      const workspace = yield* Workspace
      const bytes = Text.utf8(input.content)
      yield* checkSize(input.path, bytes.length, config.maxWriteBytes)
      const written = yield* workspace.write(input.path, (current) =>
        Effect.gen(function*() {
          yield* checkPrecondition(input.path, current, input.expected_sha256, "create-or-overwrite")
          const previousText = Option.match(current, { onNone: () => "", onSome: (c) => Text.decodeLenient(c.bytes) })
          yield* checkPlaceholders(input.path, previousText, input.content, input.allow_placeholder)
          if (Option.isSome(current) && input.allow_shrink !== true && bytes.length * 2 < current.value.bytes.length) {
            return yield* new UnsafeWrite({
              path: input.path,
              reason: `the new content (${bytes.length} bytes) removes more than half of the file (${current.value.bytes.length} bytes); use edit_file for a partial change, write the complete content, or set allow_shrink: true if the cut is intended`
            })
          }
          return bytes
        }), { callId: context.callId })
      return {
        path: input.path,
        resolved_path: written.resolved.absolute,
        created: written.created,
        sha256: written.sha256,
        previous_sha256: Option.match(written.previous, { onNone: () => null, onSome: (c) => c.sha256 }),
        bytes: written.bytes,
        lines: Text.countLines(input.content)
      }
    }).pipe(
      Effect.catchTag("@rx/tools/UnsafeWrite", (error) => Effect.fail(Errors.recoverable(error))),
      Effect.mapError(Errors.toToolError)
    ),
  // After a crash during the call: remove its temp file; the call took effect if the file holds
  // exactly the content it was to write (whoever wrote it, the file is as the call meant).
  recover: (input, context) =>
    Effect.gen(function*() {
      const config = yield* ToolsConfig
      const workspace = yield* Workspace
      yield* workspace.discardTemp(input.path, context.callId)
      const bytes = Text.utf8(input.content)
      const current = yield* readForRecovery(input.path, config.maxWriteBytes)
      if (Option.isNone(current)) return Option.none()
      const sha256 = Text.sha256(bytes)
      if (Text.sha256(current.value.bytes) !== sha256) return Option.none()
      return Option.some({
        path: input.path,
        resolved_path: current.value.resolved.absolute,
        created: input.expected_sha256 === undefined,
        sha256,
        previous_sha256: input.expected_sha256 ?? null,
        bytes: bytes.length,
        lines: Text.countLines(input.content)
      })
    }).pipe(Effect.mapError(Errors.toToolError))
})
