/**
 * `write_file {path, content, expected_sha256?, allow_placeholder?, allow_shrink?}`: create or
 * overwrite a file, atomically (temp file in the same folder, fsync, rename).
 *
 * - Creating a file needs no `expected_sha256`; giving one for a missing file is a `StaleFile`.
 * - Overwriting needs `expected_sha256` equal to the file's current sha256 (from `read_file`),
 *   otherwise a `StaleFile` error carries both hashes.
 * - Content with placeholder lines that stand for omitted code ("// ... rest of the code
 *   unchanged", a bare "...") is refused unless `allow_placeholder` is true; lines the old file
 *   already had do not count.
 * - An overwrite that removes more than half of the file's bytes is refused unless `allow_shrink`.
 */
import { Tool } from "@rx/kernel"
import { Effect, Option, Schema } from "effect"
import * as NodePath from "node:path"
import * as Errors from "./internal/errors.js"
import * as Text from "./internal/text.js"
import { StaleFile, Workspace } from "./Workspace.js"

/** A write the safety rules refuse; the call may say it is intended. */
export class UnsafeWrite extends Schema.TaggedError<UnsafeWrite>()("UnsafeWrite", {
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

/** Refuse placeholder lines that `next` adds over `previous`. */
export const checkPlaceholders = (
  path: string,
  previous: string,
  next: string,
  allowed: boolean | undefined
): Effect.Effect<void, UnsafeWrite> => {
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

export const tool = Tool.make({
  name: "write_file",
  description:
    "Create or overwrite a file in the workspace, atomically. Overwriting needs expected_sha256, the file's sha256 from read_file. Placeholder content (\"... rest of the code unchanged\") and overwrites that remove more than half of a file are refused unless allow_placeholder / allow_shrink is true.",
  input: Input,
  output: Output,
  idempotent: false,
  execute: (input) =>
    Effect.gen(function*() {
      const workspace = yield* Workspace
      const bytes = Text.utf8(input.content)
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
        }))
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
      Effect.catchTag("UnsafeWrite", (error) => Effect.fail(Errors.recoverable(error))),
      Effect.mapError(Errors.toToolError)
    )
})
