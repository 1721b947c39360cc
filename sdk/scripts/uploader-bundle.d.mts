import type { BuildOptions } from 'esbuild';
export function uppyStyles(): string;
export function uploaderBundleOptions(outfile: string): BuildOptions;
