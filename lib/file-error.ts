/** What a failed read of a file or folder means, in words: start-up errors and logs show no errno codes (docs/cli.md). */
const REASONS: Readonly<Record<string, string>> = {
  ENOENT: 'no such file or folder',
  ENOTDIR: 'not a folder, or a part of the path is not one',
  EISDIR: 'a folder, where a file is expected',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  ELOOP: 'a loop of symbolic links',
  ENAMETOOLONG: 'a name too long',
  // open(2) on a socket file.
  ENXIO: 'a socket or a device, where a regular file is expected',
}

/** A file refused before or while it is read (lib/read-file.ts): not a regular file, or larger than its kind's limit. */
export class FileRefused extends Error {}

/** Why a file or folder could not be read, without its errno code. */
export function readFailure(error: unknown): string {
  if (error instanceof FileRefused) return error.message
  return REASONS[(error as NodeJS.ErrnoException).code as string] ?? 'cannot be read'
}
