/**
 * Turn the typed errors of this package into the kernel's `ToolError`. A recoverable error goes
 * back to the model, which can choose another path or another action; a fatal one ends the goal,
 * so it is kept for a broken environment that no other call can work around.
 */
import { Tool } from "@rx/kernel"
import type * as Workspace from "../Workspace.js"

/** How an errno is treated, and why. */
export interface ErrnoClass {
  readonly recoverable: boolean
  /** One line for the model (recoverable) or the operator (fatal). */
  readonly why: string
}

const recoverableErrno = (why: string): ErrnoClass => ({ recoverable: true, why })
const fatalErrno = (why: string): ErrnoClass => ({ recoverable: false, why })

/** Every errno the file tools can meet, classified. */
export const errnoTable: Readonly<Record<string, ErrnoClass>> = {
  ENOENT: recoverableErrno("the path does not exist; list_dir or find_files show what does"),
  ENAMETOOLONG: recoverableErrno("a name or the whole path is longer than the file system allows; use a shorter one"),
  ELOOP: recoverableErrno("the path goes through too many symbolic links, or a link where none may be"),
  ENOTDIR: recoverableErrno("a component of the path is a file, not a directory"),
  EISDIR: recoverableErrno("the path is a directory where a file is needed"),
  EEXIST: recoverableErrno("something already exists at that path"),
  ENOTEMPTY: recoverableErrno("the directory is not empty"),
  EINVAL: recoverableErrno("the file system refuses this name or operation for this path"),
  EILSEQ: recoverableErrno("the name is not valid in the file system's encoding"),
  EACCES: recoverableErrno("permission denied; choose a path rx may use"),
  EPERM: recoverableErrno("operation not permitted on this path; choose another path"),
  EBUSY: recoverableErrno("the path is busy (a mount point, or in use); choose another path"),
  ETXTBSY: recoverableErrno("the file is a running program and cannot be changed now"),
  EFBIG: recoverableErrno("the file would be larger than the file system allows"),
  EOVERFLOW: recoverableErrno("the file is too large to be read"),
  EXDEV: recoverableErrno("the path crosses file systems (a mount point); choose another path"),
  EMLINK: recoverableErrno("the directory or file has too many links; choose another directory"),
  ENXIO: recoverableErrno("the path is a socket or a device without a driver, not a file"),
  ENODEV: recoverableErrno("the path is a device, not a file"),
  EAGAIN: recoverableErrno("the file is not ready (a FIFO or a locked file); try another path"),
  EWOULDBLOCK: recoverableErrno("the file is not ready (a FIFO or a locked file); try another path"),
  EINTR: recoverableErrno("the operation was interrupted; try again"),
  EROFS: fatalErrno("the file system is mounted read-only"),
  ENOSPC: fatalErrno("the disk is full"),
  EDQUOT: fatalErrno("the disk quota is exhausted"),
  EIO: fatalErrno("an input/output error: the disk or the file system is failing"),
  EMFILE: fatalErrno("rx has too many open files"),
  ENFILE: fatalErrno("the system has too many open files"),
  ENOMEM: fatalErrno("the system is out of memory"),
  ESTALE: fatalErrno("a network file system lost the file handle"),
  ETIMEDOUT: fatalErrno("a network file system does not answer"),
  ENOTSUP: fatalErrno("the file system does not support an operation rx needs (link, fsync)"),
  EOPNOTSUPP: fatalErrno("the file system does not support an operation rx needs (link, fsync)"),
  EBADF: fatalErrno("rx used a closed file descriptor (a bug in rx)"),
  EFAULT: fatalErrno("rx passed a bad address to the system (a bug in rx)")
}

/** How an errno is treated; one not in the table is fatal: nothing says a retry could work. */
export const classifyErrno = (code: string): ErrnoClass =>
  errnoTable[code] ?? fatalErrno(`an unexpected file system error (${code})`)

/** @effect/platform reasons of failures without an errno (a bad argument, a missing file). */
const recoverableReasons = new Set(["NotFound", "PermissionDenied", "AlreadyExists", "BadResource", "Busy", "BadArgument"])

/** Errors carry their fields as `details`, so the log keeps them structured. */
const fields = (error: { readonly _tag: string }): Record<string, unknown> => {
  const details: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(error)) {
    if (typeof value === "string" || typeof value === "number" || typeof value === "boolean" || value === null) details[key] = value
  }
  details["_tag"] = error._tag
  return details
}

/** Whether the model can work around a workspace error: all but a file system failure the table calls fatal. */
export const isRecoverable = (error: Workspace.WorkspaceError): boolean =>
  error._tag !== "@rx/tools/FileSystemFailure" ||
  (error.code === undefined ? recoverableReasons.has(error.reason) : classifyErrno(error.code).recoverable)

/** A workspace error as a tool error; the table's reason for an errno is added to the message. */
export const fromWorkspace = (error: Workspace.WorkspaceError): Tool.ToolError => {
  const message = error._tag === "@rx/tools/FileSystemFailure" && error.code !== undefined
    ? `${error.message} (${classifyErrno(error.code).why})`
    : error.message
  return isRecoverable(error) ? Tool.ToolError.recoverable(message, fields(error)) : Tool.ToolError.fatal(message, fields(error))
}

/** Any tagged error the model can act on. */
export const recoverable = (error: { readonly _tag: string; readonly message: string }): Tool.ToolError =>
  Tool.ToolError.recoverable(error.message, fields(error))

/** Any tagged error that must end the run. */
export const fatal = (error: { readonly _tag: string; readonly message: string }): Tool.ToolError =>
  Tool.ToolError.fatal(error.message, fields(error))

/** Pass tool errors through; turn workspace errors into tool errors. */
export const toToolError = (error: Workspace.WorkspaceError | Tool.ToolError): Tool.ToolError =>
  error._tag === "@rx/kernel/ToolError" ? error : fromWorkspace(error)
