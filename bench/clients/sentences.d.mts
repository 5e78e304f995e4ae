export declare const benchSentences: string[];
