"""Chunking: strategies (one module each) behind one registry, the step pipeline, the one
parent/child algorithm, the context factory, the fit to the model's window, the recommender.

    registry    strategies by name and code; ``Strategy`` says what each knows about itself
    plan        plans (``PARENT:STRUCTURE;CHILD:SEMANTIC,RECURSIVE``) and typed settings
    pipeline    ``run_steps``: each step over the previous one's pieces, cleaned up
    document    the one parent/child algorithm: records the store writes
    context     the tools every strategy gets (token counter, embedder, LLM client)
    fit         children cut again to fit the embedding model's window
    headings    the line classifier (seed 002's eight forms) and heading scan
    text        sentence, line and paragraph boundaries in Chinese and English
    recommend   a plan for a document from its features (``plan: auto``)
"""
