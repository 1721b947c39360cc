// <StowageUploader/>: createUploader in a React component (`@stowage/sdk/react`; react is an
// optional peer dependency). Written with createElement, not JSX, so the SDK's build needs no
// JSX settings. Callbacks are read at call time, so new ones do not remount the uploader.
import { createElement, useEffect, useRef } from 'react';
import { type CreateUploaderOptions, createUploader, type Uploader } from './uploader.ts';

export type StowageUploaderProps = Omit<CreateUploaderOptions, 'target'> & {
  className?: string;
  /** The uploader once mounted (its `uppy`, `upload()`, `open()`), and undefined when it goes. */
  onReady?: (uploader: Uploader | undefined) => void;
};

export function StowageUploader(props: StowageUploaderProps) {
  const element = useRef<HTMLDivElement>(null);
  const latest = useRef(props);
  latest.current = props;
  const { baseUrl, apiKey, publicKey, uploadToken, protocol, type, id } = props;
  // biome-ignore lint/correctness/useExhaustiveDependencies: these props make a new uploader; the rest are read through `latest`
  useEffect(() => {
    const p = latest.current;
    const uploader = createUploader({
      ...p,
      target: element.current!,
      onFileUploaded: (...a) => latest.current.onFileUploaded?.(...a),
      onSuccess: (...a) => latest.current.onSuccess?.(...a),
      onError: (...a) => latest.current.onError?.(...a),
      onProgress: (...a) => latest.current.onProgress?.(...a),
    });
    p.onReady?.(uploader);
    return () => {
      latest.current.onReady?.(undefined);
      uploader.destroy();
    };
  }, [baseUrl, apiKey, publicKey, uploadToken, protocol, type, id]);
  return createElement('div', { ref: element, className: props.className });
}
