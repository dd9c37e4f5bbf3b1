
Bgrad_outputJi½Y½;»ë6¢»K:29s¿¥½€¯£»