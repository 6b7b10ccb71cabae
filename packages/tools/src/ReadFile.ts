/**
 * `read_file {path, offset?, limit?}`: a range of lines of a text file, with the metadata a
 * later write needs (sha256, mtime, size). `offset` counts from 1: the first line is line 1.
 * Truncation is deterministic: at most `limit` lines (default `readDefaultLines`) and at most
 * `readMaxBytes` bytes, cut at the end of the last whole line that fits; a single line longer
 * than the byte cap is cut at a character boundary. Binary files (a NUL byte or invalid UTF-8)
 * are reported with their metadata, never dumped.
 */
import { Tool } from "@rx/kernel"
import { Effect, Option, Schema } from "effect"
import { createHash } from "node:crypto"
import { ToolsConfig } from "./Config.js"
import * as Errors from "./internal/errors.js"
import * as Files from "./internal/files.js"
import { readOnly } from "./internal/readOnly.js"
import * as Text from "./internal/text.js"
import { failure, Workspace } from "./Workspace.js"

export const Input = Schema.Struct({
  path: Schema.String.annotations({ description: "File path, relative to the workspace root." }),
  offset: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.greaterThanOrEqualTo(1))).annotations({
    description: "First line to return, counting from 1. Default 1."
  }),
  limit: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.greaterThanOrEqualTo(1))).annotations({
    description: "Lines to return at most. Default 2000."
  })
})
export type Input = typeof Input.Type

export const Output = Schema.Struct({
  /** The path as given. */
  path: Schema.String,
  /** The real absolute path read. */
  resolved_path: Schema.String,
  /** The lines returned, exactly as in the file (newlines included). Empty for binary files. */
  content: Schema.String,
  /** True when the file is binary; `content` is then empty. */
  binary: Schema.Boolean,
  /** First line returned (1-based). */
  start_line: Schema.Int,
  /** Last line returned (1-based, inclusive); `start_line - 1` when none was. */
  end_line: Schema.Int,
  /** Lines in the whole file. */
  total_lines: Schema.Int,
  /** Bytes in the whole file. */
  total_bytes: Schema.Int,
  /** True when the file goes on after `end_line`, or the last line returned was cut. */
  truncated: Schema.Boolean,
  /** What stopped the range: the line limit, the byte cap, or nothing (end of file). */
  truncated_by: Schema.NullOr(Schema.Literal("limit", "bytes")),
  /** The `offset` that continues the read, when there is more. */
  next_offset: Schema.NullOr(Schema.Int),
  /** sha256 of the whole file: pass it as `expected_sha256` to overwrite or edit the file. */
  sha256: Schema.String,
  /** Last modification, ISO 8601. */
  mtime: Schema.NullOr(Schema.String),
  /** Size in bytes (as `total_bytes`). */
  size: Schema.Int
})
export type Output = typeof Output.Type

export const tool = Tool.make({
  name: "read_file",
  description:
    "Read lines of a text file in the workspace. `offset` is the first line (1-based), `limit` the number of lines. Returns the content with total lines and bytes, the range returned, whether it was truncated, and the file's sha256, mtime and size (pass sha256 to write_file or edit_file).",
  input: Input,
  output: Output,
  ...readOnly,
  execute: (input) =>
    Effect.scoped(Effect.gen(function*() {
      const config = yield* ToolsConfig
      const workspace = yield* Workspace
      const offset = input.offset ?? 1
      const limit = input.limit ?? config.readDefaultLines
      const last = offset + limit - 1
      const maxBytes = config.readMaxBytes
      const opened = yield* workspace.open(input.path)
      const hash = createHash("sha256")
      const utf8 = new TextDecoder("utf-8", { fatal: true })
      const collected: Array<Uint8Array> = []
      let collectedBytes = 0
      let size = 0
      let newlines = 0
      let endsWithNewline = true
      let line = 1
      let binary = false
      yield* Files.forEachChunk(opened.file, (chunk) =>
        Effect.sync(() => {
          hash.update(chunk)
          size += chunk.length
          if (!binary) {
            if (chunk.includes(0)) binary = true
            else {
              try {
                utf8.decode(chunk, { stream: true })
              } catch {
                binary = true
              }
            }
          }
          let position = 0
          while (position < chunk.length) {
            const newline = chunk.indexOf(10, position)
            const end = newline === -1 ? chunk.length : newline + 1
            if (!binary && line >= offset && line <= last && collectedBytes <= maxBytes) {
              const piece = chunk.subarray(position, end)
              collected.push(piece)
              collectedBytes += piece.length
            }
            if (newline === -1) {
              position = chunk.length
            } else {
              newlines++
              line++
              position = end
            }
          }
          endsWithNewline = chunk[chunk.length - 1] === 10
        })
      ).pipe(Effect.mapError(failure(input.path, "read")))
      if (!binary) {
        try {
          utf8.decode()
        } catch {
          binary = true
        }
      }
      const totalLines = size === 0 ? 0 : endsWithNewline ? newlines : newlines + 1
      if (offset > Math.max(totalLines, 1)) {
        return yield* Tool.ToolError.recoverable(
          `offset ${offset} is past the end of "${input.path}", which has ${totalLines} lines`,
          { total_lines: totalLines }
        )
      }
      let content = ""
      let returned = 0
      let cutByBytes = false
      let cutLine = false
      if (!binary) {
        const buffer = Buffer.concat(collected)
        let kept: Uint8Array = buffer
        if (buffer.length > maxBytes) {
          cutByBytes = true
          const lastNewline = buffer.subarray(0, maxBytes).lastIndexOf(10)
          if (lastNewline >= 0) kept = buffer.subarray(0, lastNewline + 1)
          else {
            kept = Text.utf8Prefix(buffer, maxBytes)
            cutLine = true
          }
        }
        content = Text.decodeLenient(kept)
        returned = Text.countLines(content)
      }
      const endLine = offset + returned - 1
      const more = !binary && (endLine < totalLines || cutLine)
      const truncatedBy = !more ? null : cutByBytes ? "bytes" as const : "limit" as const
      return {
        path: input.path,
        resolved_path: opened.resolved.absolute,
        content,
        binary,
        start_line: offset,
        end_line: endLine,
        total_lines: totalLines,
        total_bytes: size,
        truncated: more,
        truncated_by: truncatedBy,
        next_offset: more && endLine + 1 <= totalLines ? endLine + 1 : null,
        sha256: hash.digest("hex"),
        mtime: Option.match(opened.info.mtime, { onNone: () => null, onSome: (date) => date.toISOString() }),
        size
      }
    })).pipe(Effect.mapError(Errors.toToolError))
})
