export function distIsFresh(root: string): boolean;
